#include "data/tasks/digit_positions.h"

#include <algorithm>

namespace pelab {

OptionSpec digit_positions_option() {
  return OptionSpec::choice("positions", "sampler", {"sampler", "abacus", "coupling"},
                            "sampler: positions from positions.sampler; abacus: each digit's position is its "
                            "significance (McLeish et al. 2024); coupling: digits of one significance share a "
                            "position counted down from the top place (Cho et al. 2024); both offset by "
                            "random_offset in training");
}

DigitPositions digit_positions(const OptionValues& options) {
  const std::string& rule = options.get_string("positions");
  if (rule == "abacus") return DigitPositions::Abacus;
  if (rule == "coupling") return DigitPositions::Coupling;
  return DigitPositions::Sampler;
}

std::vector<int64_t> number_positions(DigitPositions rule, int64_t digits, bool reversed, int64_t top) {
  std::vector<int64_t> positions(digits);
  for (int64_t t = 0; t < digits; ++t) {
    const int64_t significance = reversed ? t + 1 : digits - t;
    positions[t] = rule == DigitPositions::Coupling ? top + 1 - significance : significance;
  }
  return positions;
}

int64_t operator_position(DigitPositions rule, int64_t top) { return rule == DigitPositions::Coupling ? top + 1 : 0; }

std::pair<std::vector<int64_t>, std::vector<int64_t>> operation_positions(DigitPositions rule, int64_t n,
                                                                          int64_t result_digits, bool reversed) {
  if (rule == DigitPositions::Sampler) return {};
  const int64_t top = result_digits;
  std::vector<int64_t> input = number_positions(rule, n, reversed, top);
  input.push_back(operator_position(rule, top));
  for (int64_t p : number_positions(rule, n, reversed, top)) input.push_back(p);
  return {input, number_positions(rule, result_digits, reversed, top)};
}

std::vector<int64_t> random_operand(int64_t digits, int64_t base, Rng& rng) {
  std::uniform_int_distribution<int64_t> digit(0, base - 1);
  std::vector<int64_t> out(digits);
  for (auto& d : out) d = digit(rng);
  if (digits > 1) out[0] = 1 + std::uniform_int_distribution<int64_t>(0, base - 2)(rng);
  return out;
}

Example operation_example(std::vector<int64_t> a, int64_t op_symbol, std::vector<int64_t> b,
                          std::vector<int64_t> result, bool reversed) {
  if (reversed)
    for (auto* digits : {&a, &b, &result}) std::reverse(digits->begin(), digits->end());
  Example e;
  e.input = std::move(a);
  e.input.push_back(op_symbol);
  e.input.insert(e.input.end(), b.begin(), b.end());
  e.output = std::move(result);
  return e;
}

}  // namespace pelab
