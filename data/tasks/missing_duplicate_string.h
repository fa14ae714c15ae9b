// `missing_duplicate_string`: the bit hidden in a duplicated string ww (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/missing_duplicate_string.py: ids 0, 1 bits, 2 the hidden bit, 3 padding (odd
// lengths end with it). ww of 2 (L/2) bits with one position replaced by 2; the output is
// the bit it hid. Length 1: input [1], output 1.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class MissingDuplicateStringTask : public Seq2SeqTask {
 public:
  explicit MissingDuplicateStringTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
};

}  // namespace pelab
