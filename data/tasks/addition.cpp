#include "data/tasks/addition.h"

#include <algorithm>

namespace pelab {

AdditionTask::AdditionTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("base") + 1, options.get_int("base")),
      base_(options.get_int("base")),
      reverse_digits_(options.get_bool("reverse_digits")),
      abacus_(options.get_string("positions") == "abacus") {}

std::string AdditionTask::description() {
  return "sum of two n-digit numbers, n + 1 output digits (Kazemnejad et al. 2023); length = n";
}

std::vector<OptionSpec> AdditionTask::options() {
  return {OptionSpec::integer("base", 10, "number base (digits 0 .. base-1; the plus sign is one more symbol)", 2, 64),
          OptionSpec::boolean("reverse_digits", false, "write every number least significant digit first"),
          OptionSpec::choice("positions", "sampler", {"sampler", "abacus"},
                             "sampler: positions from positions.sampler; abacus: each digit's position is its "
                             "significance (McLeish et al. 2024), offset by random_offset in training")};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> AdditionTask::given_positions(int64_t input_tokens,
                                                                                    int64_t output_tokens) const {
  if (!abacus_) return {};
  // digits of a number of `digits` digits as written: significance 1 (ones) up to `digits`
  auto significance = [&](int64_t digits) {
    std::vector<int64_t> s(digits);
    for (int64_t t = 0; t < digits; ++t) s[t] = reverse_digits_ ? t + 1 : digits - t;
    return s;
  };
  const int64_t n = (input_tokens - 1) / 2;
  std::vector<int64_t> input = significance(n);
  input.push_back(0);  // the plus sign
  for (int64_t s : significance(n)) input.push_back(s);
  return {input, significance(output_tokens)};
}

Example AdditionTask::generate(int64_t length, Rng& rng) const {
  // Digits most significant first; the first digit of a multi-digit operand is non-zero.
  auto operand = [&] {
    std::vector<int64_t> digits = random_symbols(length, rng, base_);
    if (length > 1) digits[0] = 1 + std::uniform_int_distribution<int64_t>(0, base_ - 2)(rng);
    return digits;
  };
  const std::vector<int64_t> a = operand(), b = operand();
  std::vector<int64_t> sum(length + 1);
  int64_t carry = 0;
  for (int64_t i = length - 1; i >= 0; --i) {
    const int64_t column = a[i] + b[i] + carry;
    sum[i + 1] = column % base_;
    carry = column / base_;
  }
  sum[0] = carry;

  auto written = [&](std::vector<int64_t> digits) {
    if (reverse_digits_) std::reverse(digits.begin(), digits.end());
    return digits;
  };
  Example e;
  e.input = written(a);
  e.input.push_back(plus_symbol());
  for (int64_t d : written(b)) e.input.push_back(d);
  e.output = written(sum);
  return e;
}

}  // namespace pelab
