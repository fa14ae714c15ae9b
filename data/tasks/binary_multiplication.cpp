#include "data/tasks/binary_multiplication.h"

#include "data/tasks/binary_addition.h"

namespace pelab {

BinaryMultiplicationTask::BinaryMultiplicationTask(const OptionValues& options)
    : Seq2SeqTask(3, 3) {}

std::string BinaryMultiplicationTask::description() { return "the product of two binary numbers, little-endian"; }

std::vector<OptionSpec> BinaryMultiplicationTask::options() { return {}; }

Example BinaryMultiplicationTask::generate(int64_t length, Rng& rng) const {
  return BinaryAdditionTask::binary_operation(length, rng, /*multiply=*/true);
}

}  // namespace pelab
