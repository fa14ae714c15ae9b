// `odds_first`: the symbols at odd positions, then those at even positions (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/odds_first.py: output s[1::2] followed by s[0::2] (0-based, as the code
// does; its docstring shows the other order).
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class OddsFirstTask : public Seq2SeqTask {
 public:
  explicit OddsFirstTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
  bool outputs_are_input_symbols() const override { return true; }
  bool outputs_rearrange_input() const override { return true; }
};

}  // namespace pelab
