#include "data/tasks/multiplication.h"

namespace pelab {

MultiplicationTask::MultiplicationTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("base") + 1, options.get_int("base")),
      base_(options.get_int("base")),
      reverse_digits_(options.get_bool("reverse_digits")),
      positions_(digit_positions(options)) {}

std::string MultiplicationTask::description() {
  return "product of two n-digit numbers, 2n output digits (McLeish et al. 2024); length = n";
}

std::vector<OptionSpec> MultiplicationTask::options() {
  return {OptionSpec::integer("base", 10, "number base (digits 0 .. base-1; the times sign is one more symbol)", 2, 64),
          OptionSpec::boolean("reverse_digits", true, "write every number least significant digit first (the paper's)"),
          digit_positions_option()};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> MultiplicationTask::given_positions(int64_t input_tokens,
                                                                                          int64_t output_tokens) const {
  return operation_positions(positions_, (input_tokens - 1) / 2, output_tokens, reverse_digits_);
}

Example MultiplicationTask::generate(int64_t length, Rng& rng) const {
  // digits most significant first
  const std::vector<int64_t> a = random_operand(length, base_, rng), b = random_operand(length, base_, rng);
  // schoolbook product, least significant place first: place i + j gets a_i * b_j
  std::vector<int64_t> places(2 * length, 0);
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j) places[i + j] += a[length - 1 - i] * b[length - 1 - j];
  int64_t carry = 0;
  for (auto& place : places) {
    place += carry;
    carry = place / base_;
    place %= base_;
  }
  const std::vector<int64_t> product(places.rbegin(), places.rend());  // most significant first
  return operation_example(a, times_symbol(), b, product, reverse_digits_);
}

}  // namespace pelab
