#include "data/tasks/cycle_navigation.h"

namespace pelab {

CycleNavigationTask::CycleNavigationTask(const OptionValues& options)
    : Seq2SeqTask(3, 5) {}

std::string CycleNavigationTask::description() { return "final position on a cycle of 5 after steps -1, 0, +1"; }

std::vector<OptionSpec> CycleNavigationTask::options() { return {}; }

Example CycleNavigationTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  int64_t position = 0;
  for (int64_t s : e.input) position += s - 1;
  e.output = {((position % 5) + 5) % 5};
  return e;
}

}  // namespace pelab
