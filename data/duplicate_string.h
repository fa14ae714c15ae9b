// `duplicate_string` (Delétang et al. 2023, context-sensitive): output the input twice,
// ww. google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/duplicate_string.py:
// uniform random symbols over a binary alphabet by default; output length 2n.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class DuplicateStringTask : public Seq2SeqTask {
 public:
  explicit DuplicateStringTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 2 * length; }
  bool outputs_are_input_symbols() const override { return true; }
  bool outputs_rearrange_input() const override { return true; }
};

}  // namespace pelab
