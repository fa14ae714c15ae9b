#include "data/tasks/odds_first.h"

namespace pelab {

OddsFirstTask::OddsFirstTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("alphabet_size")) {}

std::string OddsFirstTask::description() { return "the symbols at odd positions, then those at even positions"; }

std::vector<OptionSpec> OddsFirstTask::options() { return {OptionSpec::integer("alphabet_size", 2, "number of input symbols", 2, 65536)}; }

Example OddsFirstTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  for (int64_t start : {1, 0})
    for (int64_t i = start; i < length; i += 2) e.output.push_back(e.input[i]);
  return e;
}

}  // namespace pelab
