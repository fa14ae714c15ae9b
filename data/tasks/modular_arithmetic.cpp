#include "data/tasks/modular_arithmetic.h"

namespace pelab {

ModularArithmeticTask::ModularArithmeticTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("modulus") + 4, options.get_int("modulus")), modulus_(options.get_int("modulus")) {}

std::string ModularArithmeticTask::description() { return "value mod m of digits joined by +, -, * with precedence"; }

std::vector<OptionSpec> ModularArithmeticTask::options() { return {OptionSpec::integer("modulus", 5, "the modulus m", 2, 1000)}; }

Example ModularArithmeticTask::generate(int64_t length, Rng& rng) const {
  Example e;
  const int64_t n = input_length(length), m = modulus_;
  std::uniform_int_distribution<int64_t> digit(0, m - 1), op(m, m + 2);
  for (int64_t i = 0; i < n; ++i) e.input.push_back(i % 2 == 0 ? digit(rng) : op(rng));
  // sum of products; a '-' negates the term that follows it
  int64_t total = 0, term = e.input[0], sign = 1;
  for (int64_t i = 1; i + 1 < n; i += 2) {
    const int64_t o = e.input[i], d = e.input[i + 1];
    if (o == m + 2) {
      term = term * d % m;
    } else {
      total += sign * term;
      sign = o == m + 1 ? -1 : 1;
      term = d;
    }
  }
  total += sign * term;
  e.output = {((total % m) + m) % m};
  return e;
}

}  // namespace pelab
