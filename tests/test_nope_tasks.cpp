// The NoPE-paper tasks (Kazemnejad et al. 2023): copy, reverse, sort, addition, each checked
// by an independent computation on generated examples.
#include "tests/catch.h"

#include <algorithm>
#include <map>

#include <sstream>

#include "core/run/run.h"
#include "core/train/trainer.h"
#include "data/task_registry.h"
#include "data/tasks/addition.h"
#include "data/tasks/symbol_strings.h"
#include "tests/support.h"

using namespace pelab;

namespace {

template <typename T>
T make(std::map<std::string, OptionValue> settings = {}) {
  auto options = OptionValues::defaults(T::options());
  for (const auto& [name, value] : settings) options.set(name, value);
  return T(options);
}

// Digits (most significant first) -> value.
uint64_t value_of(const std::vector<int64_t>& digits, int64_t base) {
  uint64_t v = 0;
  for (int64_t d : digits) v = v * base + d;
  return v;
}

}  // namespace

CATCH_TEST_CASE("copy, reverse and sort rearrange uniform symbols of the configured vocabulary", "[tasks][nope]") {
  auto copy = make<CopyTask>({{"vocab_size", int64_t(7)}});
  auto reverse = make<ReverseTask>();
  auto sort = make<SortTask>({{"vocab_size", int64_t(5)}});
  CATCH_CHECK(copy.input_symbols() == 7);
  CATCH_CHECK(reverse.input_symbols() == 26);  // default: the letters
  Rng rng(8);
  std::vector<int64_t> histogram(7, 0);
  for (int64_t length : {1, 5, 40}) {
    Example c = copy.generate(length, rng), r = reverse.generate(length, rng), s = sort.generate(length, rng);
    CATCH_CHECK(c.output == c.input);
    for (int64_t i = 0; i < length; ++i) CATCH_CHECK(r.output[i] == r.input[length - 1 - i]);
    // sorted, and the same multiset: every symbol's count is kept
    CATCH_CHECK(std::is_sorted(s.output.begin(), s.output.end()));
    for (int64_t symbol = 0; symbol < 5; ++symbol)
      CATCH_CHECK(std::count(s.output.begin(), s.output.end(), symbol) ==
                  std::count(s.input.begin(), s.input.end(), symbol));
    for (int64_t x : c.input) ++histogram.at(x);
    CATCH_CHECK(copy.sequence_length(length) == 2 * length);
  }
  for (int64_t n : histogram) CATCH_CHECK(n > 0);
  for (int i = 0; i < 100; ++i)
    for (int64_t x : sort.generate(30, rng).input) CATCH_CHECK((x >= 0 && x < 5));
}

CATCH_TEST_CASE("addition: the output digits are the sum of the two operands", "[tasks][nope]") {
  for (int64_t base : {10, 2, 7}) {
    auto task = make<AdditionTask>({{"base", base}});
    CATCH_CHECK(task.input_symbols() == base + 1);
    CATCH_CHECK(task.num_classes() == base);
    Rng rng(base);
    for (int64_t n : {1, 2, 5, 9}) {
      CATCH_INFO("base " << base << ", " << n << " digits");
      CATCH_CHECK(task.sequence_length(n) == (2 * n + 1) + (n + 1));
      for (int i = 0; i < 50; ++i) {
        Example e = task.generate(n, rng);
        CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == 2 * n + 1);
        CATCH_REQUIRE(static_cast<int64_t>(e.output.size()) == n + 1);
        CATCH_CHECK(e.input[n] == task.plus_symbol());
        std::vector<int64_t> a(e.input.begin(), e.input.begin() + n), b(e.input.begin() + n + 1, e.input.end());
        for (int64_t d : a) CATCH_CHECK((d >= 0 && d < base));
        if (n > 1) CATCH_CHECK((a[0] != 0 && b[0] != 0));  // exactly n digits
        CATCH_CHECK(value_of(a, base) + value_of(b, base) == value_of(e.output, base));
      }
    }
  }
}

CATCH_TEST_CASE("addition with reverse_digits writes every number least significant digit first", "[tasks][nope]") {
  auto plain = make<AdditionTask>();
  auto reversed = make<AdditionTask>({{"reverse_digits", true}});
  Rng a(3), b(3);
  for (int i = 0; i < 20; ++i) {
    Example p = plain.generate(6, a), r = reversed.generate(6, b);  // the same operands
    std::vector<int64_t> back(r.output.rbegin(), r.output.rend());
    CATCH_CHECK(back == p.output);
    CATCH_CHECK(std::equal(p.input.begin(), p.input.begin() + 6, r.input.rbegin() + 7));
  }
}

CATCH_TEST_CASE("addition of 1-digit numbers: every pair of digits occurs, and carries are 45%", "[tasks][nope]") {
  auto task = make<AdditionTask>();
  Rng rng(12);
  int carries = 0;
  std::vector<int> seen(100, 0);
  for (int i = 0; i < 10000; ++i) {
    Example e = task.generate(1, rng);
    ++seen[e.input[0] * 10 + e.input[2]];
    carries += e.output[0];
  }
  for (int n : seen) CATCH_CHECK(n > 50);
  CATCH_CHECK(carries == Approx(4500).margin(250));
}

CATCH_TEST_CASE("addition positions: abacus: every digit's position is its significance", "[tasks][nope][abacus]") {
  for (const bool reversed : {false, true})
    for (const std::string format : {"encoder", "causal_lm"}) {
      CATCH_INFO(format << (reversed ? ", reverse_digits" : ""));
      auto options = OptionValues::defaults(AdditionTask::options());
      options.set("positions", std::string("abacus"));
      options.set("reverse_digits", reversed);
      AdditionTask task(options);
      task.set_format(parse_format(format));
      task.set_bos(format == "causal_lm");
      Rng rng(3);
      Batch b = task.sample(16, 4, rng);  // 4-digit operands, a 5-digit sum
      CATCH_REQUIRE(b.positions.defined());
      CATCH_REQUIRE(b.positions.sizes() == b.tokens.sizes());
      const int64_t first = format == "causal_lm" ? 1 : 0;  // after BOS
      const int64_t output_start = first + 9 + (format == "causal_lm" ? 1 : 0);
      for (int64_t row = 0; row < 16; ++row) {
        auto pos = [&](int64_t t) { return b.positions[row][t].item<int64_t>(); };
        auto digit = [&](int64_t t) { return b.tokens[row][t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken; };
        // the value of a number from its digits and their positions alone: sum d x 10^(position - 1)
        auto value = [&](int64_t start, int64_t count, bool outputs) {
          int64_t v = 0, p10 = 1;
          std::vector<std::pair<int64_t, int64_t>> by_position;
          for (int64_t t = start; t < start + count; ++t)
            by_position.push_back({pos(t), outputs ? b.targets[row][t - 1 + (format == "causal_lm" ? 0 : 1)].item<int64_t>()
                                                   : digit(t)});
          std::sort(by_position.begin(), by_position.end());
          for (int64_t k = 0; k < count; ++k) {
            CATCH_CHECK(by_position[k].first == k + 1);  // positions 1 .. count: significance
            v += by_position[k].second * p10;
            p10 *= 10;
          }
          return v;
        };
        if (first == 1) CATCH_CHECK(pos(0) == 0);  // BOS
        CATCH_CHECK(pos(first + 4) == 0);          // the plus sign
        CATCH_CHECK(pos(first) == (reversed ? 1 : 4));
        const int64_t a = value(first, 4, false), c = value(first + 5, 4, false);
        const int64_t sum = value(output_start, 5, true);
        CATCH_CHECK(a + c == sum);
      }
    }
  // without the option the task leaves positions to the sampler
  AdditionTask plain(OptionValues::defaults(AdditionTask::options()));
  Rng rng(3);
  CATCH_CHECK_FALSE(plain.sample(2, 3, rng).positions.defined());
}

CATCH_TEST_CASE("task-given positions reach the model as given or offset by random_offset, other samplers refused",
                "[tasks][nope][abacus]") {
  // learned with 8 rows: addition of 5-digit numbers has 17 tokens but positions 0..6 only
  auto config = test::tiny_config({"task.name=addition", "task.positions=abacus", "encoding.name=learned",
                                   "encoding.max_positions=8", "train.min_length=1", "train.max_length=5",
                                   "eval.lengths=[5]", "train.steps=3", "train.log_every=1"});
  auto task = make_task(config.task.name, config.task.options, config.task.format);
  Encoder model = build_model(config, *task);
  CATCH_CHECK_NOTHROW(check_lengths_fit(config, *task, *model));
  std::ostringstream log;
  Trainer trainer(config, model, *task, torch::kCPU);
  trainer.train(log, false);  // 17 tokens through an 8-row table: only the given positions fit
  CATCH_CHECK(trainer.evaluator().evaluate().front().per_token_accuracy >= 0.0);
  auto plain = config;
  plain.task.options.set("positions", std::string("sampler"));
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(plain, *make_task("addition", plain.task.options), *model),
                          test::ContainsText("does not fit the table"));
  // random_offset: training positions reach L_max - 1, which the table must hold
  config.positions.sampler = "random_offset";
  config.positions.max_length = 8;
  CATCH_CHECK_NOTHROW(check_lengths_fit(config, *task, *model));
  config.positions.max_length = 9;
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *task, *model), test::ContainsText("does not fit the table"));
  config.positions.sampler = "randomized";
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *task, *model),
                          test::ContainsText("positions.sampler randomized cannot draw them: use contiguous"));
}
