#include "data/tasks/number_sort.h"

#include <algorithm>

namespace pelab {

NumberSortTask::NumberSortTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("base") + 1),
      base_(options.get_int("base")),
      digits_(options.get_int("digits")),
      reverse_digits_(options.get_bool("reverse_digits")),
      positions_(digit_positions(options)) {}

std::string NumberSortTask::description() {
  return "sort n numbers of k digits, comma-separated (McLeish et al. 2024); length = n numbers";
}

std::vector<OptionSpec> NumberSortTask::options() {
  return {OptionSpec::integer("base", 10, "number base (digits 0 .. base-1; the comma is one more symbol)", 2, 64),
          OptionSpec::integer("digits", 3, "digits of every number", 1, 64),
          OptionSpec::boolean("reverse_digits", true, "write every number least significant digit first (the paper's)"),
          digit_positions_option()};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> NumberSortTask::given_positions(int64_t input_tokens,
                                                                                      int64_t output_tokens) const {
  if (positions_ == DigitPositions::Sampler) return {};
  const std::vector<int64_t> number = number_positions(positions_, digits_, reverse_digits_, digits_);
  auto list = [&](int64_t tokens) {
    std::vector<int64_t> positions;
    while (static_cast<int64_t>(positions.size()) < tokens) {
      if (!positions.empty()) positions.push_back(operator_position(positions_, digits_));
      positions.insert(positions.end(), number.begin(), number.end());
    }
    return positions;
  };
  return {list(input_tokens), list(output_tokens)};
}

Example NumberSortTask::generate(int64_t length, Rng& rng) const {
  std::vector<std::vector<int64_t>> numbers;  // digits most significant first
  for (int64_t i = 0; i < length; ++i) numbers.push_back(random_symbols(digits_, rng, base_));
  auto written = [&](const std::vector<std::vector<int64_t>>& list) {
    std::vector<int64_t> tokens;
    for (const auto& number : list) {
      if (!tokens.empty()) tokens.push_back(comma());
      if (reverse_digits_) tokens.insert(tokens.end(), number.rbegin(), number.rend());
      else tokens.insert(tokens.end(), number.begin(), number.end());
    }
    return tokens;
  };
  Example e;
  e.input = written(numbers);
  std::sort(numbers.begin(), numbers.end());  // equal digit counts: lexicographic order is numeric order
  e.output = written(numbers);
  return e;
}

}  // namespace pelab
