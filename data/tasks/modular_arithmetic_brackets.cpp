#include "data/tasks/modular_arithmetic_brackets.h"

#include "data/tasks/expression.h"

namespace pelab {

ModularArithmeticBracketsTask::ModularArithmeticBracketsTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("modulus") + 6, options.get_int("modulus")), modulus_(options.get_int("modulus")), multiplication_(options.get_bool("multiplication")) {}

std::string ModularArithmeticBracketsTask::description() { return "value mod m of a bracketed expression of +, - and *"; }

std::vector<OptionSpec> ModularArithmeticBracketsTask::options() { return {OptionSpec::integer("modulus", 5, "the modulus m", 2, 1000), OptionSpec::boolean("multiplication", true, "draw * besides + and -")}; }

Example ModularArithmeticBracketsTask::generate(int64_t length, Rng& rng) const {
  const auto x = expression::generate(length, modulus_, multiplication_, rng);
  Example e;
  const int64_t m = modulus_;
  e.input = expression::to_ids(x, {m, m + 1, m + 2, m + 3, m + 4});
  e.output = {x.value};
  return e;
}

}  // namespace pelab
