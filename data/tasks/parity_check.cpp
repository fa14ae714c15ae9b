#include "data/tasks/parity_check.h"

namespace pelab {

ParityCheckTask::ParityCheckTask(const OptionValues& options)
    : Seq2SeqTask(2, 2) {}

std::string ParityCheckTask::description() { return "parity of the number of 1s of a binary string"; }

std::vector<OptionSpec> ParityCheckTask::options() { return {}; }

Example ParityCheckTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  int64_t ones = 0;
  for (int64_t s : e.input) ones += s;
  e.output = {ones % 2};
  return e;
}

}  // namespace pelab
