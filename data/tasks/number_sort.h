// `number_sort`: sorting multi-digit numbers (McLeish et al. 2024, "Transformers Can Do
// Arithmetic with the Right Embeddings", section 4.3: Abacus positions, tests to 30
// numbers of up to 30 digits). Input: n numbers of `digits` digits, a comma between them;
// output: the same numbers in ascending order, written the same way. The length is n, the
// numbers: input and output n * (digits + 1) - 1 tokens. positions: abacus or coupling
// (data/tasks/digit_positions.h) over each number's places, commas as operators.
// Departures: every number has exactly `digits` digits (leading zeros allowed; the paper
// varies the digits per number up to a maximum), and the output is the sorted numbers
// themselves (the paper also evaluates outputting their order).
#pragma once

#include "core/config/options.h"
#include "data/task.h"
#include "data/tasks/digit_positions.h"

namespace pelab {

class NumberSortTask : public Seq2SeqTask {
 public:
  explicit NumberSortTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t input_length(int64_t length) const override { return length * (digits_ + 1) - 1; }
  int64_t output_length(int64_t length) const override { return input_length(length); }
  bool outputs_are_input_symbols() const override { return true; }  // digits and commas
  std::pair<std::vector<int64_t>, std::vector<int64_t>> given_positions(int64_t input_tokens,
                                                                        int64_t output_tokens) const override;

  int64_t comma() const { return base_; }
  int64_t digits() const { return digits_; }
  bool reverse_digits() const { return reverse_digits_; }

 private:
  int64_t base_, digits_;
  bool reverse_digits_;
  DigitPositions positions_;
};

}  // namespace pelab
