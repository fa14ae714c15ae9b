#include "data/tasks/binary_addition.h"

#include "data/tasks/binary_numbers.h"

namespace pelab {

BinaryAdditionTask::BinaryAdditionTask(const OptionValues& options)
    : Seq2SeqTask(3, 3) {}

std::string BinaryAdditionTask::description() { return "the sum of two binary numbers, little-endian"; }

std::vector<OptionSpec> BinaryAdditionTask::options() { return {}; }

Example BinaryAdditionTask::binary_operation(int64_t length, Rng& rng, bool multiply) {
  Example e;
  bits::Bits result;
  if (length <= 2) {
    std::uniform_int_distribution<int64_t> small(0, (int64_t{1} << length) - 2);
    const int64_t k = small(rng);
    for (int64_t i = 0; i < length; ++i) e.input.push_back((k >> i) & 1);
    // the reference's products of these degenerate inputs: [] at L = 1, [0] at L = 2
    result = multiply ? bits::Bits(length - 1, 0) : bits::trimmed(e.input);
  } else {
    std::uniform_int_distribution<int64_t> first_width(1, length - 2);
    const int64_t ln = first_width(rng), lm = length - 1 - ln;
    const auto n = bits::random_nonzero(ln, rng), m = bits::random_nonzero(lm, rng);
    e.input = n;
    e.input.push_back(2);
    e.input.insert(e.input.end(), m.begin(), m.end());
    result = multiply ? bits::multiply(n, m) : bits::add(n, m);
  }
  const int64_t width = multiply ? length : length + 1;
  e.output = result;
  e.output.push_back(2);
  e.scored.assign(e.output.size(), true);
  e.output.resize(width, 0);
  e.scored.resize(width, false);
  return e;
}

Example BinaryAdditionTask::generate(int64_t length, Rng& rng) const {
  return binary_operation(length, rng, /*multiply=*/false);
}

}  // namespace pelab
