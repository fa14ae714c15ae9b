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
  const int64_t plus = m, minus = m + 1, open = m + 2, close = m + 3;
  for (const auto& p : x.pieces) {
    if (p.is_digit) e.input.push_back(p.digit);
    else if (p.token == expression::Token::Plus) e.input.push_back(plus);
    else if (p.token == expression::Token::Minus) e.input.push_back(minus);
    else if (p.token == expression::Token::Open) e.input.push_back(open);
    else e.input.push_back(close);
  }
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
