#include "data/tasks/even_pairs.h"

namespace pelab {

EvenPairsTask::EvenPairsTask(const OptionValues& options)
    : Seq2SeqTask(2, 2) {}

std::string EvenPairsTask::description() { return "whether the number of ab and ba pairs of a binary string is even"; }

std::vector<OptionSpec> EvenPairsTask::options() { return {}; }

Example EvenPairsTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  int64_t changes = 0;
  for (int64_t i = 0; i + 1 < length; ++i) changes += e.input[i] != e.input[i + 1];
  e.output = {changes % 2};
  return e;
}

}  // namespace pelab
