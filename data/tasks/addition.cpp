#include "data/tasks/addition.h"

namespace pelab {

AdditionTask::AdditionTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("base") + 1, options.get_int("base")),
      base_(options.get_int("base")),
      reverse_digits_(options.get_bool("reverse_digits")),
      positions_(digit_positions(options)) {}

std::string AdditionTask::description() {
  return "sum of two n-digit numbers, n + 1 output digits (Kazemnejad et al. 2023); length = n";
}

std::vector<OptionSpec> AdditionTask::options() {
  return {OptionSpec::integer("base", 10, "number base (digits 0 .. base-1; the plus sign is one more symbol)", 2, 64),
          OptionSpec::boolean("reverse_digits", false, "write every number least significant digit first"),
          digit_positions_option()};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> AdditionTask::given_positions(int64_t input_tokens,
                                                                                    int64_t output_tokens) const {
  return operation_positions(positions_, (input_tokens - 1) / 2, output_tokens, reverse_digits_);
}

Example AdditionTask::generate(int64_t length, Rng& rng) const {
  // digits most significant first
  const std::vector<int64_t> a = random_operand(length, base_, rng), b = random_operand(length, base_, rng);
  std::vector<int64_t> sum(length + 1);
  int64_t carry = 0;
  for (int64_t i = length - 1; i >= 0; --i) {
    const int64_t column = a[i] + b[i] + carry;
    sum[i + 1] = column % base_;
    carry = column / base_;
  }
  sum[0] = carry;
  return operation_example(a, plus_symbol(), b, sum, reverse_digits_);
}

}  // namespace pelab
