// `multiplication`: the product of two n-digit numbers (McLeish et al. 2024, "Transformers
// Can Do Arithmetic with the Right Embeddings", section 4.2: reversed digits, Abacus
// positions, operands up to 25 x 25 digits in tests). Input: a, a times sign, b; output:
// the product with 2n digits (leading zeros where it has fewer), so examples of one length
// align. The length is n, the digits per operand: input 2n + 1 tokens, output 2n. Operands
// have exactly n digits (no leading zero) when n > 1. positions: abacus or coupling
// (data/tasks/digit_positions.h) over the product's 2n places.
// Departures: both operands have n digits (the paper's grid varies the two lengths apart),
// and coupling follows the significance rule of addition (Cho et al.'s follow-up, arXiv
// 2410.15787, couples N x 2 multiplication by another rule, not reproduced).
#pragma once

#include "core/config/options.h"
#include "data/task.h"
#include "data/tasks/digit_positions.h"

namespace pelab {

class MultiplicationTask : public Seq2SeqTask {
 public:
  explicit MultiplicationTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t input_length(int64_t length) const override { return 2 * length + 1; }
  int64_t output_length(int64_t length) const override { return 2 * length; }
  bool outputs_are_input_symbols() const override { return true; }  // digit d is input symbol d
  std::pair<std::vector<int64_t>, std::vector<int64_t>> given_positions(int64_t input_tokens,
                                                                        int64_t output_tokens) const override;

  int64_t base() const { return base_; }
  int64_t times_symbol() const { return base_; }

 private:
  int64_t base_;
  bool reverse_digits_;
  DigitPositions positions_;
};

}  // namespace pelab
