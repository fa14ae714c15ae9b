// `binary_addition`: the sum of two binary numbers, little-endian (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/binary_addition.py: ids 0, 1 bits, 2 '+'. For L >= 3, operands of
// ln ~ U[1, L-2] and L-1-ln bits, each uniform in [1, 2^bits - 1], written little-endian with
// their high zeros; for L <= 2 one number k in [0, 2^L - 1) without '+'. Output: the sum's bits
// little-endian without high zeros, the terminator 2, zero padding to L + 1; scored up to and
// including the terminator.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class BinaryAdditionTask : public Seq2SeqTask {
 public:
  explicit BinaryAdditionTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length + 1; }
  // Shared with binary_multiplication: the operands, the result, the terminated output.
  static Example binary_operation(int64_t length, Rng& rng, bool multiply);
};

}  // namespace pelab
