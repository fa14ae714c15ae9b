// `reverse_string` (Delétang et al. 2023, deterministic context-free): output the input
// reversed. google-deepmind/neural_networks_chomsky_hierarchy tasks/dcf/reverse_string.py:
// uniform random symbols over a binary alphabet by default.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class ReverseStringTask : public Seq2SeqTask {
 public:
  explicit ReverseStringTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
  bool outputs_are_input_symbols() const override { return true; }
  bool outputs_rearrange_input() const override { return true; }
};

}  // namespace pelab
