// `solve_equation`: the digit x that solves a bracketed linear equation mod m (Deletang et al. 2023, deterministic context-free)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/dcf/solve_equation.py: ids 0..m-1 digits, m '+', m+1 '-', m+2 '(', m+3 ')',
// m+4 'x', m+5 '='. An expression of L - 2 tokens (+ and - only), one digit replaced by x
// (from a uniform index, scanning forward cyclically to a digit), then '=' and its value;
// the output is the replaced digit. Lengths below 3 give the reference's all-zero dummy.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class SolveEquationTask : public Seq2SeqTask {
 public:
  explicit SolveEquationTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }

 private:
  int64_t modulus_;
};

}  // namespace pelab
