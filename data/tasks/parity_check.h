// `parity_check`: parity of the number of 1s of a binary string (Deletang et al. 2023, regular)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/regular/parity_check.py: output (number of 1s) mod 2, one token.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class ParityCheckTask : public Seq2SeqTask {
 public:
  explicit ParityCheckTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
};

}  // namespace pelab
