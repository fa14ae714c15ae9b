// `modular_arithmetic_brackets`: value mod m of a bracketed expression of +, - and * (Deletang et al. 2023, deterministic context-free)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/dcf/modular_arithmetic_brackets.py (data/tasks/expression.h): ids 0..m-1 digits,
// m '+', m+1 '-', m+2 '*', m+3 '(', m+4 ')' (input alphabet m + 6 as the reference); output one
// token. The experiments use mult = true.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class ModularArithmeticBracketsTask : public Seq2SeqTask {
 public:
  explicit ModularArithmeticBracketsTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }

 private:
  int64_t modulus_;
  bool multiplication_;
};

}  // namespace pelab
