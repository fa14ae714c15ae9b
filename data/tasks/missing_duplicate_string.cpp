#include "data/tasks/missing_duplicate_string.h"

namespace pelab {

MissingDuplicateStringTask::MissingDuplicateStringTask(const OptionValues& options)
    : Seq2SeqTask(4, 2) {}

std::string MissingDuplicateStringTask::description() { return "the bit hidden in a duplicated string ww"; }

std::vector<OptionSpec> MissingDuplicateStringTask::options() { return {}; }

Example MissingDuplicateStringTask::generate(int64_t length, Rng& rng) const {
  Example e;
  if (length == 1) {
    e.input = {1};
    e.output = {1};
    return e;
  }
  const auto half = random_symbols(length / 2, rng, 2);
  e.input = half;
  e.input.insert(e.input.end(), half.begin(), half.end());
  std::uniform_int_distribution<int64_t> hidden(0, 2 * (length / 2) - 1);
  const int64_t i = hidden(rng);
  e.output = {e.input[i]};
  e.input[i] = 2;
  if (length % 2) e.input.push_back(3);
  return e;
}

}  // namespace pelab
