// `binary_multiplication`: the product of two binary numbers, little-endian (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/binary_multiplication.py: inputs as binary_addition ('*' is id 2); output the
// product little-endian without high zeros, the terminator 2, zero padding to L tokens;
// scored up to and including the terminator.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class BinaryMultiplicationTask : public Seq2SeqTask {
 public:
  explicit BinaryMultiplicationTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
};

}  // namespace pelab
