#include "data/duplicate_string.h"

namespace pelab {

DuplicateStringTask::DuplicateStringTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("alphabet_size")) {}

std::string DuplicateStringTask::description() { return "output the input string twice (Deletang et al. 2023)"; }

std::vector<OptionSpec> DuplicateStringTask::options() {
  return {OptionSpec::integer("alphabet_size", 2, "number of input symbols", 2, 65536)};
}

Example DuplicateStringTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  e.output = e.input;
  e.output.insert(e.output.end(), e.input.begin(), e.input.end());
  return e;
}

}  // namespace pelab
