// `modular_arithmetic`: value mod m of digits joined by +, -, * with precedence (Deletang et al. 2023, regular)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/regular/modular_arithmetic.py: ids 0..m-1 digits, m '+', m+1 '-', m+2 '*'
// (m+3, the blank, is never drawn). An even length is shortened by one (digit op digit ...).
// Evaluated with * before + and -, where '-' negates the term after it; output one token.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class ModularArithmeticTask : public Seq2SeqTask {
 public:
  explicit ModularArithmeticTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
  int64_t input_length(int64_t length) const override { return length % 2 == 0 ? length - 1 : length; }

 private:
  int64_t modulus_;
};

}  // namespace pelab
