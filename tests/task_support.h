// Helpers of the task tests: a task from its option defaults, the input-independent chance
// level counted over generated examples, and a short training run that must beat it.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/config/options.h"
#include "core/run/run.h"
#include "data/task.h"
#include "tests/catch.h"
#include "tests/support.h"

namespace pelab::test {

// A task of type T with its defaults but `set`.
template <typename T>
T make_task(const std::vector<std::pair<std::string, OptionValue>>& set = {}) {
  auto options = OptionValues::defaults(T::options());
  for (const auto& [name, value] : set) options.set(name, value);
  return T(options);
}

// The best input-independent accuracy: at each output slot the most frequent scored output,
// averaged over the scored outputs, from `count` examples of `length`.
template <typename T>
double counted_chance(const T& task, int64_t length, int count) {
  Rng rng(7);
  std::vector<std::map<int64_t, int>> seen(task.output_length(length));
  for (int i = 0; i < count; ++i) {
    const Example e = task.generate(length, rng);
    for (size_t s = 0; s < e.output.size(); ++s)
      if (e.scored.empty() || e.scored[s]) ++seen[s][e.output[s]];
  }
  double most_sum = 0, scored = 0;
  for (const auto& slot : seen)
    for (const auto& [value, n] : slot) scored += n;
  for (const auto& slot : seen) {
    int most = 0;
    for (const auto& [value, n] : slot) most = std::max(most, n);
    most_sum += most;
  }
  return most_sum / scored;
}

// A few hundred steps of the quickstart model (width 64, 2 blocks, RoPE) on `task`: at a
// training length, per-token accuracy above the input-independent baseline by `margin`. A task
// whose targets could not be learned (a wrong answer rule) fails here.
inline void learns_above_chance(const std::vector<std::string>& task, int64_t length, double margin) {
  TemporaryDirectory dir;
  std::vector<std::string> overrides = {"encoding.name=rope", "model.d_model=64", "model.num_layers=2",
                                        "train.steps=400", "train.batch_size=32", "train.learning_rate=0.002",
                                        "train.warmup_steps=50", "train.log_every=100", "threads=1",
                                        "eval.lengths=[" + std::to_string(length) + "]", "eval.samples=128",
                                        "output.dir=" + dir.path};
  overrides.insert(overrides.end(), task.begin(), task.end());
  std::ostringstream log;
  const RunOutcome outcome = execute_run(tiny_config(overrides), log, false);
  CATCH_INFO(log.str());
  const auto& r = outcome.evaluation.at(0);
  CATCH_CHECK(r.per_token_accuracy > r.chance_token_accuracy + margin);
}

}  // namespace pelab::test
