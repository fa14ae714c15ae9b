#include "data/tasks/bucket_sort.h"

#include <algorithm>

namespace pelab {

BucketSortTask::BucketSortTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("alphabet_size")) {}

std::string BucketSortTask::description() { return "the input sorted ascending"; }

std::vector<OptionSpec> BucketSortTask::options() { return {OptionSpec::integer("alphabet_size", 5, "number of input symbols", 2, 65536)}; }

Example BucketSortTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  e.output = e.input;
  std::sort(e.output.begin(), e.output.end());
  return e;
}

}  // namespace pelab
