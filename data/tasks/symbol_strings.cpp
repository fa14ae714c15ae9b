#include "data/tasks/symbol_strings.h"

#include <algorithm>

namespace pelab {

SymbolStringTask::SymbolStringTask(const OptionValues& options, StringTransform transform)
    : Seq2SeqTask(options.get_int("vocab_size")), transform_(transform) {}

std::vector<OptionSpec> SymbolStringTask::options() {
  return {OptionSpec::integer("vocab_size", 26, "number of distinct input symbols", 2, 65536)};
}

Example SymbolStringTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  e.output = e.input;
  if (transform_ == StringTransform::Reverse) std::reverse(e.output.begin(), e.output.end());
  if (transform_ == StringTransform::Sort) std::sort(e.output.begin(), e.output.end());
  return e;
}

}  // namespace pelab
