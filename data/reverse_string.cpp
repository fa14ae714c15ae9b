#include "data/reverse_string.h"

#include <algorithm>

namespace pelab {

ReverseStringTask::ReverseStringTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("alphabet_size")) {}

std::string ReverseStringTask::description() { return "output the input string reversed (Deletang et al. 2023)"; }

std::vector<OptionSpec> ReverseStringTask::options() {
  return {OptionSpec::integer("alphabet_size", 2, "number of input symbols", 2, 65536)};
}

Example ReverseStringTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  e.output.assign(e.input.rbegin(), e.input.rend());
  return e;
}

}  // namespace pelab
