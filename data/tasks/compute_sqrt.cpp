#include "data/tasks/compute_sqrt.h"

#include "data/tasks/binary_numbers.h"

namespace pelab {

ComputeSqrtTask::ComputeSqrtTask(const OptionValues& options)
    : Seq2SeqTask(2, 2) {}

std::string ComputeSqrtTask::description() { return "floor of the square root of a binary number, big-endian"; }

std::vector<OptionSpec> ComputeSqrtTask::options() { return {}; }

Example ComputeSqrtTask::generate(int64_t length, Rng& rng) const {
  Example e;
  const auto n = bits::random_nonzero(length, rng);  // little-endian
  const auto root = bits::padded(bits::floor_sqrt(n), output_length(length));
  e.input.assign(n.rbegin(), n.rend());
  e.output.assign(root.rbegin(), root.rend());
  return e;
}

}  // namespace pelab
