#include "data/tasks/mqar.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace pelab {

MqarTask::MqarTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("keys") + options.get_int("values"), options.get_int("values")),
      keys_(options.get_int("keys")),
      values_(options.get_int("values")) {}

std::string MqarTask::description() {
  return "multi-query associative recall (Zoology): n key-value pairs, then every key queried; length = n pairs";
}

std::vector<OptionSpec> MqarTask::options() {
  return {OptionSpec::integer("keys", 64, "distinct keys (at least the longest length's pairs)", 1, 1 << 20),
          OptionSpec::integer("values", 64, "values, drawn with replacement", 2, 1 << 20)};
}

void MqarTask::check_length(int64_t length, bool training) const {
  if (length > keys_)
    throw std::invalid_argument(fmt::format("mqar: {} pairs need {} distinct keys; task.keys is {}", length, length, keys_));
}

Example MqarTask::generate(int64_t length, Rng& rng) const {
  // n distinct keys: a partial Fisher-Yates shuffle of [0, keys)
  std::vector<int64_t> keys(keys_);
  std::iota(keys.begin(), keys.end(), 0);
  for (int64_t i = 0; i < length; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, keys_ - 1);
    std::swap(keys[i], keys[pick(rng)]);
  }
  std::uniform_int_distribution<int64_t> value(0, values_ - 1);
  std::vector<int64_t> values(length);
  Example e;
  for (int64_t i = 0; i < length; ++i) {
    values[i] = value(rng);
    e.input.push_back(keys[i]);
    e.input.push_back(keys_ + values[i]);
  }
  std::vector<int64_t> order(length);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i : order) {
    e.input.push_back(keys[i]);
    e.output.push_back(values[i]);
  }
  return e;
}

}  // namespace pelab
