// The recall and state-tracking tasks (data/tasks/mqar.h, induction_heads.h,
// selective_copying.h, state_tracking.h): every answer rebuilt from the generated input
// alone, and the input-independent chance level counted over many examples.
#include "tests/catch.h"

#include <map>
#include <sstream>

#include "data/tasks/induction_heads.h"
#include "data/tasks/mqar.h"
#include "data/tasks/selective_copying.h"
#include "data/tasks/state_tracking.h"
#include "core/run/run.h"
#include "tests/support.h"
#include "tests/task_support.h"

using namespace pelab;

using test::counted_chance;

CATCH_TEST_CASE("mqar: every query's output is the value paired with its key", "[tasks][recall]") {
  const auto task = test::make_task<MqarTask>({{"keys", int64_t(20)}, {"values", int64_t(8)}});
  Rng rng(3);
  for (int64_t n : {1, 4, 20}) {
    for (int i = 0; i < 50; ++i) {
      const Example e = task.generate(n, rng);
      CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == 3 * n);
      std::map<int64_t, int64_t> pairs;
      for (int64_t p = 0; p < n; ++p) {
        CATCH_CHECK(e.input[2 * p] < 20);                                   // a key
        CATCH_CHECK((e.input[2 * p + 1] >= 20 && e.input[2 * p + 1] < 28));  // a value
        pairs[e.input[2 * p]] = e.input[2 * p + 1] - 20;
      }
      CATCH_CHECK(static_cast<int64_t>(pairs.size()) == n);  // distinct keys
      std::map<int64_t, int> queried;
      for (int64_t q = 0; q < n; ++q) {
        const int64_t key = e.input[2 * n + q];
        CATCH_REQUIRE(pairs.count(key));
        CATCH_CHECK(e.output[q] == pairs.at(key));
        ++queried[key];
      }
      CATCH_CHECK(static_cast<int64_t>(queried.size()) == n);  // every key once
    }
  }
  CATCH_CHECK_THROWS_WITH(task.check_length(21, true), test::ContainsText("21 pairs need 21 distinct keys; task.keys is 20"));
  CATCH_CHECK(counted_chance(task, 4, 8000) == Approx(1.0 / 8).margin(0.01));
}

CATCH_TEST_CASE("induction_heads: the output is the token after the first trigger", "[tasks][recall]") {
  const auto task = test::make_task<InductionHeadsTask>({{"vocab_size", int64_t(6)}});
  Rng rng(4);
  for (int64_t length : {3, 4, 10, 64}) {
    for (int i = 0; i < 100; ++i) {
      const Example e = task.generate(length, rng);
      CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == length);
      CATCH_CHECK(e.input.back() == task.trigger());
      CATCH_CHECK(std::count(e.input.begin(), e.input.end(), task.trigger()) == 2);
      const auto first = std::find(e.input.begin(), e.input.end(), task.trigger());
      CATCH_CHECK(e.output == std::vector<int64_t>{*(first + 1)});
      CATCH_CHECK(e.output[0] < 6);
    }
  }
  CATCH_CHECK_THROWS_WITH(task.check_length(2, true), test::ContainsText("at least 3 tokens"));
  CATCH_CHECK(counted_chance(task, 16, 12000) == Approx(1.0 / 6).margin(0.015));
}

CATCH_TEST_CASE("selective_copying: the output is the data tokens in their order", "[tasks][recall]") {
  const auto task = test::make_task<SelectiveCopyingTask>({{"vocab_size", int64_t(5)}, {"tokens", int64_t(4)}});
  Rng rng(5);
  for (int64_t length : {4, 5, 12, 100}) {
    for (int i = 0; i < 100; ++i) {
      const Example e = task.generate(length, rng);
      std::vector<int64_t> data;
      for (int64_t s : e.input)
        if (s != task.noise()) data.push_back(s);
      CATCH_CHECK(e.output == data);
      CATCH_CHECK(data.size() == 4);
    }
  }
  CATCH_CHECK_THROWS_WITH(task.check_length(3, true), test::ContainsText("length 3 cannot hold task.tokens = 4"));
  CATCH_CHECK(counted_chance(task, 12, 10000) == Approx(1.0 / 5).margin(0.015));
}

CATCH_TEST_CASE("state_tracking: groups, their products, and the running state", "[tasks][state]") {
  const std::map<std::string, size_t> sizes = {{"s3", 6}, {"a4", 12}, {"a5", 60}, {"s5", 120}};
  for (const auto& [group, size] : sizes) {
    CATCH_INFO(group);
    const auto task = test::make_task<StateTrackingTask>({{"group", group}});
    const auto& elements = task.elements();
    CATCH_REQUIRE(elements.size() == size);
    for (size_t i = 0; i < elements[0].size(); ++i) CATCH_CHECK(elements[0][i] == static_cast<int>(i));  // identity
    Rng rng(6);
    for (int i = 0; i < 40; ++i) {
      const Example e = task.generate(12, rng);
      // the running product of the images, applied one after another (g_1 first)
      std::vector<int> state = elements[0];
      for (size_t t = 0; t < e.input.size(); ++t) {
        const auto& g = elements[e.input[t]];
        for (auto& x : state) x = g[x];
        CATCH_CHECK(elements[e.output[t]] == state);
      }
    }
  }
  // S3 by hand: (0 1) then (1 2) sends 0 -> 1 -> 2, 1 -> 0, 2 -> 1
  const auto s3 = test::make_task<StateTrackingTask>({{"group", std::string("s3")}});
  const auto id = [&](std::vector<int> p) {
    return std::find(s3.elements().begin(), s3.elements().end(), p) - s3.elements().begin();
  };
  CATCH_CHECK(s3.compose(id({1, 0, 2}), id({0, 2, 1})) == id({2, 0, 1}));
  // A5: even permutations only
  const auto a5 = test::make_task<StateTrackingTask>({{"group", std::string("a5")}});
  for (const auto& p : a5.elements()) {
    int inversions = 0;
    for (size_t i = 0; i < p.size(); ++i)
      for (size_t j = i + 1; j < p.size(); ++j) inversions += p[i] > p[j];
    CATCH_CHECK(inversions % 2 == 0);
  }
  // uniform inputs: the state is uniform at every position after the first
  const auto a4 = test::make_task<StateTrackingTask>({{"group", std::string("a4")}});
  CATCH_CHECK(counted_chance(a4, 6, 12000) == Approx(1.0 / 12).margin(0.012));
}

using test::learns_above_chance;

CATCH_TEST_CASE("mqar: a small model recalls above chance within training", "[learning][recall]") {
  learns_above_chance({"task.name=mqar", "task.keys=32", "task.values=16", "train.min_length=2", "train.max_length=8"},
                      4, 0.1);
}

CATCH_TEST_CASE("induction_heads: a small model learns the induction rule within training", "[learning][recall]") {
  learns_above_chance({"task.name=induction_heads", "task.vocab_size=8", "train.min_length=8", "train.max_length=32",
                       "train.steps=600"},
                      16, 0.3);
}

CATCH_TEST_CASE("selective_copying: a small model copies above chance within training", "[learning][recall]") {
  learns_above_chance({"task.name=selective_copying", "task.vocab_size=8", "task.tokens=4", "train.min_length=8",
                       "train.max_length=24"},
                      12, 0.2);
}

CATCH_TEST_CASE("state_tracking: a small model tracks S3 above chance within training", "[learning][state]") {
  learns_above_chance({"task.name=state_tracking", "task.group=s3", "train.min_length=1", "train.max_length=10"}, 5,
                      0.15);
}
