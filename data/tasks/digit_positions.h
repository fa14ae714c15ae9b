// Task-given positions for numbers written digit by digit (addition, multiplication,
// number_sort: their `positions` option):
//   abacus    (McLeish et al. 2024, "Transformers Can Do Arithmetic with the Right
//             Embeddings"; mcleish7/arithmetic): a digit's position is its significance, 1 for
//             the ones digit, 2 for the tens, ..., operators and separators 0.
//   coupling  (Cho et al. 2024, "Position Coupling"; HanseulJo/position-coupling,
//             AdditionDatasetWithCoupledPositions): digits of the same significance share one
//             position, counted down from the most significant place of the example: with top
//             places, significance s at top + 1 - s (the ones digit at top), operators at
//             top + 1, as the reference gives '+' and '=' the position after the ones digits.
// Both are offset by positions.sampler: random_offset in training (one offset per batch; the
// papers draw it per example), as given in evaluation. BOS and the causal_lm separator get 0.
// Also what the two-operand tasks (addition, multiplication) share: their operands and the
// example "a OP b" -> result as written.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

enum class DigitPositions { Sampler, Abacus, Coupling };

// The `positions` option of a digit task.
OptionSpec digit_positions_option();
DigitPositions digit_positions(const OptionValues& options);

// The positions of a number of `digits` digits as written (most significant first, or least
// with `reversed`), under `rule` with `top` places in the example (coupling).
std::vector<int64_t> number_positions(DigitPositions rule, int64_t digits, bool reversed, int64_t top);
// The position of an operator or separator under `rule`.
int64_t operator_position(DigitPositions rule, int64_t top);
// Positions of "a OP b" with two n-digit operands and a result of `result_digits` digits
// (the example's top places): (input, output), or empty under Sampler.
std::pair<std::vector<int64_t>, std::vector<int64_t>> operation_positions(DigitPositions rule, int64_t n,
                                                                          int64_t result_digits, bool reversed);

// An operand of `digits` digits in `base`, most significant first, uniform, its first digit
// non-zero when it has more than one.
std::vector<int64_t> random_operand(int64_t digits, int64_t base, Rng& rng);
// a OP b -> result, each given most significant first, written reversed or not.
Example operation_example(std::vector<int64_t> a, int64_t op_symbol, std::vector<int64_t> b,
                          std::vector<int64_t> result, bool reversed);

}  // namespace pelab
