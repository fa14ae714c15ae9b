#include "data/tasks/solve_equation.h"

#include "data/tasks/expression.h"

namespace pelab {

SolveEquationTask::SolveEquationTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("modulus") + 6, options.get_int("modulus")), modulus_(options.get_int("modulus")) {}

std::string SolveEquationTask::description() { return "the digit x that solves a bracketed linear equation mod m"; }

std::vector<OptionSpec> SolveEquationTask::options() { return {OptionSpec::integer("modulus", 5, "the modulus m", 2, 1000)}; }

Example SolveEquationTask::generate(int64_t length, Rng& rng) const {
  Example e;
  const int64_t m = modulus_;
  if (length < 3) {
    e.input.assign(length, 0);
    e.output = {0};
    return e;
  }
  const auto x = expression::generate(length - 2, m, /*multiplication=*/false, rng);
  // + m, - m+1, ( m+2, ) m+3 (no *: the expression has none)
  e.input = expression::to_ids(x, {m, m + 1, /*times=*/-1, m + 2, m + 3});
  std::uniform_int_distribution<int64_t> start(0, length - 3);
  int64_t i = start(rng);
  while (e.input[i] >= m) i = (i + 1) % (length - 2);
  e.output = {e.input[i]};
  e.input[i] = m + 4;  // x
  e.input.push_back(m + 5);  // =
  e.input.push_back(x.value);
  return e;
}

}  // namespace pelab
