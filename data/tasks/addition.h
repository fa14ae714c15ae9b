// `addition` (Kazemnejad et al. 2023, multi-digit addition; McGill-NLP/length-generalization
// s2s_addition, "n-by-n" categories): two n-digit numbers in base `base` (10 by default),
// a plus sign between them; the output is their sum written with n + 1 digits (a leading
// zero when there is no final carry), so all examples of one length align. The length is
// n, the digits per operand: input 2n + 1 tokens, output n + 1. Operands have exactly n
// digits (no leading zero) when n > 1. With reverse_digits, every number is written least
// significant digit first (the order that lets a left-to-right model carry).
#pragma once

#include "core/config/options.h"
#include "data/task.h"
#include "data/tasks/digit_positions.h"

namespace pelab {

class AdditionTask : public Seq2SeqTask {
 public:
  explicit AdditionTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t input_length(int64_t length) const override { return 2 * length + 1; }
  int64_t output_length(int64_t length) const override { return length + 1; }
  bool outputs_are_input_symbols() const override { return true; }  // digit d is input symbol d
  // positions: abacus or coupling (data/tasks/digit_positions.h), over the sum's n + 1 places.
  std::pair<std::vector<int64_t>, std::vector<int64_t>> given_positions(int64_t input_tokens,
                                                                        int64_t output_tokens) const override;

  int64_t base() const { return base_; }
  int64_t plus_symbol() const { return base_; }

 private:
  int64_t base_;
  bool reverse_digits_;
  DigitPositions positions_;
};

}  // namespace pelab
