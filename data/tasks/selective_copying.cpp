#include "data/tasks/selective_copying.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace pelab {

SelectiveCopyingTask::SelectiveCopyingTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("vocab_size") + 1, options.get_int("vocab_size")),
      vocab_(options.get_int("vocab_size")),
      tokens_(options.get_int("tokens")) {}

std::string SelectiveCopyingTask::description() {
  return "copy the data tokens scattered among noise, in order (Mamba's selective copying); length = input tokens";
}

std::vector<OptionSpec> SelectiveCopyingTask::options() {
  return {OptionSpec::integer("vocab_size", 16, "data tokens besides the noise token (Mamba: 16)", 2, 1 << 20),
          OptionSpec::integer("tokens", 16, "data tokens to copy (Mamba: 16)", 1, 1 << 20)};
}

void SelectiveCopyingTask::check_length(int64_t length, bool training) const {
  if (length < tokens_)
    throw std::invalid_argument(fmt::format("selective_copying: length {} cannot hold task.tokens = {}", length, tokens_));
}

Example SelectiveCopyingTask::generate(int64_t length, Rng& rng) const {
  // `tokens` distinct positions, in order: a partial Fisher-Yates shuffle, then sorted
  std::vector<int64_t> positions(length);
  std::iota(positions.begin(), positions.end(), 0);
  for (int64_t i = 0; i < tokens_; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, length - 1);
    std::swap(positions[i], positions[pick(rng)]);
  }
  positions.resize(tokens_);
  std::sort(positions.begin(), positions.end());
  Example e;
  e.input.assign(length, noise());
  const auto data = random_symbols(tokens_, rng, vocab_);
  for (int64_t i = 0; i < tokens_; ++i) e.input[positions[i]] = data[i];
  e.output = data;
  return e;
}

}  // namespace pelab
