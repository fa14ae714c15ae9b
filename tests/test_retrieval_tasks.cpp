// The retrieval and arithmetic tasks of 2023-2024 (data/tasks/passkey.h, flip_flop.h,
// ngram_lookup.h, multiplication.h, number_sort.h, digit_positions.h): every answer rebuilt
// from the generated input alone, the chance level counted, the evaluation conditions
// (eval.depths, eval.p_ignore) through evaluation and the run file, and a short training run
// above chance for each task.
#include "tests/catch.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/config/sweep_config.h"
#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "core/train/trainer.h"
#include "data/task_registry.h"
#include "data/tasks/addition.h"
#include "data/tasks/flip_flop.h"
#include "data/tasks/multiplication.h"
#include "data/tasks/ngram_lookup.h"
#include "data/tasks/number_sort.h"
#include "data/tasks/passkey.h"
#include "tests/support.h"
#include "tests/task_support.h"

using namespace pelab;
using test::counted_chance;
using test::make_task;

CATCH_TEST_CASE("passkey: the output is the digits after the key marker, at the depth asked", "[tasks][retrieval]") {
  for (const std::string filler : {"repeated", "random"}) {
    CATCH_INFO(filler);
    const auto task = make_task<PasskeyTask>({{"digits", int64_t(3)}, {"filler", filler}});
    Rng rng(5);
    std::map<int64_t, int> depths_seen;  // filler tokens before the key, at length 20
    for (int64_t length : {5, 6, 20, 64}) {
      for (int i = 0; i < 200; ++i) {
        const Example e = task.generate(length, rng);
        CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == length);
        CATCH_CHECK(e.input.back() == task.query());
        const auto marker = std::find(e.input.begin(), e.input.end(), task.key_marker());
        CATCH_REQUIRE(marker != e.input.end());
        CATCH_CHECK(std::count(e.input.begin(), e.input.end(), task.key_marker()) == 1);
        CATCH_CHECK(std::vector<int64_t>(marker + 1, marker + 4) == e.output);
        // everything else is filler; the repeated phrase continues across the key
        std::vector<int64_t> filler_tokens(e.input.begin(), marker);
        filler_tokens.insert(filler_tokens.end(), marker + 4, e.input.end() - 1);
        CATCH_CHECK(static_cast<int64_t>(filler_tokens.size()) == task.fillers(length));
        for (size_t f = 0; f < filler_tokens.size(); ++f) {
          CATCH_CHECK((filler_tokens[f] >= 10 && filler_tokens[f] < 15));
          if (filler == "repeated") CATCH_CHECK(filler_tokens[f] == 10 + int64_t(f % 5));
        }
        if (length == 20) ++depths_seen[marker - e.input.begin()];
      }
    }
    // training: every depth from the start (0 fillers before) to the end (15) drawn
    CATCH_CHECK(depths_seen.size() == 16);
    // a depth puts round(depth x fillers) filler tokens before the key; same keys at every depth
    for (const auto& [depth, before] : std::vector<std::pair<double, int64_t>>{{0, 0}, {0.25, 4}, {0.5, 8}, {1, 15}}) {
      Rng a(9), b(9);
      const Example e = task.generate_at(20, depth, a);
      CATCH_CHECK(std::find(e.input.begin(), e.input.end(), task.key_marker()) - e.input.begin() == before);
      CATCH_CHECK(e.output == task.generate_at(20, 0.5, b).output);
    }
  }
  const auto task = make_task<PasskeyTask>();
  CATCH_CHECK(task.evaluation_condition() == "depth");
  CATCH_CHECK_THROWS_WITH(task.check_length(6, true), test::ContainsText("passkey: length 6 cannot hold the key marker, "
                                                                         "5 digits and the query (at least 7 tokens)"));
  CATCH_CHECK_NOTHROW(task.check_length(7, true));
  CATCH_CHECK(counted_chance(task, 20, 8000) == Approx(0.1).margin(0.01));  // uniform digits
}

CATCH_TEST_CASE("flip_flop: every read returns the last write, ignores drawn at p_ignore", "[tasks][retrieval]") {
  const auto task = make_task<FlipFlopTask>();
  CATCH_CHECK(task.evaluation_condition() == "p_ignore");
  for (const double p : {0.8, 0.98, 0.1}) {
    CATCH_INFO("p_ignore " << p);
    Rng rng(6);
    int64_t ignores = 0, middle = 0, reads = 0;
    for (int i = 0; i < 300; ++i) {
      const Example e = p == 0.8 ? task.generate(64, rng) : task.generate_at(64, p, rng);
      CATCH_REQUIRE(e.input.size() == 64);
      CATCH_CHECK((e.input.front() == FlipFlopTask::kWrite0 || e.input.front() == FlipFlopTask::kWrite1));
      CATCH_CHECK(e.input.back() == FlipFlopTask::kRead);
      int64_t memory = -1;
      for (size_t t = 0; t < e.input.size(); ++t) {
        const int64_t s = e.input[t];
        if (s == FlipFlopTask::kWrite0 || s == FlipFlopTask::kWrite1) memory = s - FlipFlopTask::kWrite0;
        CATCH_CHECK(e.scored[t] == (s == FlipFlopTask::kRead));
        if (s == FlipFlopTask::kRead) {
          CATCH_CHECK(e.output[t] == memory);
          ++reads;
        }
        if (t > 0 && t + 1 < e.input.size()) {
          ++middle;
          ignores += s == FlipFlopTask::kIgnore0 || s == FlipFlopTask::kIgnore1;
        }
      }
    }
    CATCH_CHECK(double(ignores) / middle == Approx(p).margin(0.01));
    CATCH_CHECK(reads >= 300);
  }
  CATCH_CHECK_THROWS_WITH(task.check_length(1, true), test::ContainsText("flip_flop: length 1 cannot hold"));
  CATCH_CHECK(counted_chance(task, 16, 8000) == Approx(0.5).margin(0.02));  // the written bits are uniform
}

CATCH_TEST_CASE("ngram_lookup: the output follows the n-gram, which occurs once", "[tasks][retrieval]") {
  for (const std::string variant : {"prefix", "suffix"}) {
    CATCH_INFO(variant);
    const auto task = make_task<NgramLookupTask>({{"vocab_size", int64_t(4)}, {"n", int64_t(3)},
                                                  {"answer", int64_t(2)}, {"variant", variant}});
    Rng rng(8);
    for (int64_t length : {5, 12, 40}) {
      for (int i = 0; i < 100; ++i) {
        const Example e = task.generate(length, rng);
        CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == length + 4);
        const bool prefix = variant == "prefix";
        CATCH_REQUIRE(e.input[prefix ? 3 : length] == task.separator());
        const std::vector<int64_t> ngram = prefix ? std::vector<int64_t>(e.input.begin(), e.input.begin() + 3)
                                                  : std::vector<int64_t>(e.input.end() - 3, e.input.end());
        const std::vector<int64_t> string = prefix ? std::vector<int64_t>(e.input.begin() + 4, e.input.end())
                                                   : std::vector<int64_t>(e.input.begin(), e.input.begin() + length);
        std::vector<int64_t> at;
        for (int64_t t = 0; t + 3 <= length; ++t)
          if (std::equal(ngram.begin(), ngram.end(), string.begin() + t)) at.push_back(t);
        CATCH_REQUIRE(at.size() == 1);
        CATCH_REQUIRE(at[0] + 3 + 2 <= length);
        CATCH_CHECK(e.output == std::vector<int64_t>(string.begin() + at[0] + 3, string.begin() + at[0] + 5));
      }
    }
  }
  const auto task = make_task<NgramLookupTask>();
  CATCH_CHECK_THROWS_WITH(task.check_length(7, true), test::ContainsText("a string of 7 symbols cannot hold a 3-gram "
                                                                         "and its answer of 5 (at least 8)"));
  CATCH_CHECK(counted_chance(task, 20, 8000) == Approx(1.0 / 26).margin(0.01));
  // a string over 2 symbols has no trigram that occurs once: a clear error, not a hang
  const auto binary = make_task<NgramLookupTask>({{"vocab_size", int64_t(2)}, {"answer", int64_t(1)}});
  Rng rng(1);
  CATCH_CHECK_THROWS_WITH(binary.generate(200, rng), test::ContainsText("no 3-gram occurs once in 1000 strings"));
}

namespace {

// The value of each number of a batch row read from its digit tokens and their task-given
// positions alone: abacus reads significance = position, coupling significance = top + 1 -
// position. `outputs`: read the targets (the output digits) instead of the tokens.
int64_t value_by_positions(const Batch& b, int64_t row, int64_t start, int64_t count, bool coupling, int64_t top,
                           bool outputs, bool causal_lm) {
  int64_t v = 0;
  std::vector<int64_t> seen;
  for (int64_t t = start; t < start + count; ++t) {
    const int64_t position = b.positions[row][t].item<int64_t>();
    const int64_t significance = coupling ? top + 1 - position : position;
    seen.push_back(significance);
    const int64_t digit = outputs ? b.targets[row][t - (causal_lm ? 1 : 0)].item<int64_t>()
                                  : b.tokens[row][t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken;
    int64_t p10 = 1;
    for (int64_t k = 1; k < significance; ++k) p10 *= 10;
    v += digit * p10;
  }
  std::sort(seen.begin(), seen.end());
  for (int64_t k = 0; k < count; ++k) CATCH_CHECK(seen[k] == k + 1);  // one digit per significance
  return v;
}

}  // namespace

CATCH_TEST_CASE("addition and multiplication under abacus and coupling positions: values from positions alone",
                "[tasks][arithmetic][abacus]") {
  for (const std::string rule : {"abacus", "coupling"})
    for (const bool reversed : {false, true})
      for (const std::string format : {"encoder", "causal_lm"})
        for (const bool multiply : {false, true}) {
          CATCH_INFO(rule << (reversed ? ", reversed" : "") << ", " << format << (multiply ? ", multiplication" : ""));
          const std::vector<std::pair<std::string, OptionValue>> set = {{"positions", rule}, {"reverse_digits", reversed}};
          std::unique_ptr<Seq2SeqTask> task;
          if (multiply) task = std::make_unique<MultiplicationTask>(make_task<MultiplicationTask>(set));
          else task = std::make_unique<AdditionTask>(make_task<AdditionTask>(set));
          task->set_format(parse_format(format));
          const bool lm = format == "causal_lm";
          Rng rng(3);
          const int64_t n = 4, out = multiply ? 2 * n : n + 1, top = out;
          const Batch b = task->sample(16, n, rng);
          CATCH_REQUIRE(b.positions.defined());
          const bool coupling = rule == "coupling";
          const int64_t output_start = 2 * n + 1 + (lm ? 1 : 0);
          for (int64_t row = 0; row < 16; ++row) {
            // the operator: 0 (abacus) or top + 1 (coupling: after the ones place)
            CATCH_CHECK(b.positions[row][n].item<int64_t>() == (coupling ? top + 1 : 0));
            const int64_t a = value_by_positions(b, row, 0, n, coupling, top, false, lm);
            const int64_t c = value_by_positions(b, row, n + 1, n, coupling, top, false, lm);
            const int64_t result = value_by_positions(b, row, output_start, out, coupling, top, true, lm);
            CATCH_CHECK((multiply ? a * c : a + c) == result);
            CATCH_CHECK(a >= 1000);  // n digits exactly
          }
        }
  // multiplication's answer from the digits as written, without positions
  const auto task = make_task<MultiplicationTask>({{"reverse_digits", false}});
  Rng rng(4);
  for (int i = 0; i < 200; ++i) {
    const Example e = task.generate(3, rng);
    auto number = [](auto begin, auto end) {
      int64_t v = 0;
      for (auto it = begin; it != end; ++it) v = 10 * v + *it;
      return v;
    };
    CATCH_REQUIRE(e.input[3] == task.times_symbol());
    CATCH_CHECK(number(e.input.begin(), e.input.begin() + 3) * number(e.input.begin() + 4, e.input.end()) ==
                number(e.output.begin(), e.output.end()));
  }
}

CATCH_TEST_CASE("number_sort: the output is the input's numbers in ascending order", "[tasks][arithmetic]") {
  for (const bool reversed : {false, true}) {
    CATCH_INFO((reversed ? "reversed" : "as written"));
    const auto task = make_task<NumberSortTask>({{"digits", int64_t(2)}, {"reverse_digits", reversed}});
    Rng rng(2);
    for (int i = 0; i < 200; ++i) {
      const Example e = task.generate(5, rng);
      CATCH_REQUIRE(e.input.size() == 14);  // 5 numbers of 2 digits, 4 commas
      auto numbers = [&](const std::vector<int64_t>& tokens) {
        std::vector<int64_t> values;
        for (size_t at = 0; at < tokens.size(); at += 3) {
          if (at > 0) CATCH_CHECK(tokens[at - 1] == task.comma());
          values.push_back(reversed ? tokens[at] + 10 * tokens[at + 1] : 10 * tokens[at] + tokens[at + 1]);
        }
        return values;
      };
      std::vector<int64_t> in = numbers(e.input), out = numbers(e.output);
      CATCH_CHECK(std::is_sorted(out.begin(), out.end()));
      std::sort(in.begin(), in.end());
      CATCH_CHECK(in == out);
    }
    // abacus: each digit's significance in its number, commas 0
    auto abacus = make_task<NumberSortTask>({{"digits", int64_t(2)}, {"reverse_digits", reversed},
                                             {"positions", std::string("abacus")}});
    const auto [input, output] = abacus.given_positions(8, 8);
    const std::vector<int64_t> expected = reversed ? std::vector<int64_t>{1, 2, 0, 1, 2, 0, 1, 2}
                                                   : std::vector<int64_t>{2, 1, 0, 2, 1, 0, 2, 1};
    CATCH_CHECK(input == expected);
    CATCH_CHECK(output == expected);
  }
  CATCH_CHECK(counted_chance(make_task<NumberSortTask>(), 4, 8000) > 0.1);  // sorted: small first digits first
}

CATCH_TEST_CASE("evaluation conditions: a row per length and depth, in the run file and the table",
                "[tasks][retrieval][evaluation]") {
  test::TemporaryDirectory dir;
  auto config = test::tiny_config({"task.name=passkey", "task.digits=2", "train.min_length=6", "train.max_length=12",
                                   "train.steps=2", "train.log_every=1", "eval.lengths=[8, 12]", "eval.samples=16",
                                   "eval.depths=[0, 0.5, 1]", "output.dir=" + dir.path});
  std::ostringstream log;
  const RunOutcome outcome = execute_run(config, log, false);
  CATCH_REQUIRE(outcome.evaluation.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    CATCH_CHECK(outcome.evaluation[i].length == (i < 3 ? 8 : 12));
    CATCH_CHECK(outcome.evaluation[i].condition == "depth");
    CATCH_CHECK(outcome.evaluation[i].condition_value == std::vector<double>{0, 0.5, 1}[i % 3]);
  }
  CATCH_CHECK_THAT(log.str(), test::ContainsText("loss     depth"));
  const RunRecord record = read_run_file(dir.path + "/run.h5");
  CATCH_REQUIRE(record.evaluation.size() == 6);
  CATCH_CHECK(record.evaluation[4].condition == "depth");
  CATCH_CHECK(record.evaluation[4].condition_value == 0.5);
  CATCH_CHECK(record.evaluation[4].same_settings(outcome.evaluation[4]));
  CATCH_CHECK_FALSE(record.evaluation[4].same_settings(outcome.evaluation[3]));  // another depth
  CATCH_CHECK(record.evaluation[4].per_sequence_accuracy == outcome.evaluation[4].per_sequence_accuracy);

  // a condition the task does not have is refused before training
  auto wrong = test::tiny_config({"task.name=copy", "eval.depths=[0.5]"});
  CATCH_CHECK_THROWS_WITH(execute_run(wrong, log, false),
                          test::ContainsText("eval.depths is set, but task copy has no depth condition"));
  auto flip = test::tiny_config({"task.name=passkey", "eval.p_ignore=[0.9]"});
  CATCH_CHECK_THROWS_WITH(execute_run(flip, log, false),
                          test::ContainsText("eval.p_ignore is set, but task passkey has no p_ignore condition"));
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"eval.depths=[1.5]"}), test::ContainsText("eval.depths"));
}

using test::learns_above_chance;

CATCH_TEST_CASE("passkey: a small model retrieves the key above chance within training", "[learning][retrieval]") {
  learns_above_chance({"task.name=passkey", "task.format=causal_lm", "model.causal=true", "task.digits=3",
                       "train.min_length=8", "train.max_length=24"},
                      24, 0.3);
}

CATCH_TEST_CASE("flip_flop: a small model reads the last write above chance within training", "[learning][retrieval]") {
  learns_above_chance({"task.name=flip_flop", "train.min_length=4", "train.max_length=16"}, 16, 0.2);
}

CATCH_TEST_CASE("ngram_lookup: a small model looks up above chance within training", "[learning][retrieval]") {
  learns_above_chance({"task.name=ngram_lookup", "task.vocab_size=8", "task.answer=1", "train.min_length=6",
                       "train.max_length=12", "train.steps=600"},
                      10, 0.15);
}

CATCH_TEST_CASE("multiplication and number_sort: a small model beats chance within training",
                "[learning][arithmetic]") {
  learns_above_chance({"task.name=multiplication", "task.positions=abacus", "train.min_length=1", "train.max_length=3"},
                      2, 0.1);
  learns_above_chance({"task.name=number_sort", "task.digits=2", "train.min_length=2", "train.max_length=5"}, 4, 0.1);
}

CATCH_TEST_CASE("suites: every generated task in the CPU suite, every run of both suites fits its lengths",
                "[suite][sweep]") {
  for (const auto& [file, expected_runs] : std::vector<std::pair<std::string, size_t>>{{"configs/suites/cpu.yaml", 112},
                                                                                        {"configs/suites/gpu.yaml", 420}}) {
    CATCH_INFO(file);
    const SweepConfig sweep = load_sweep_config(test::source_path(file));
    const auto runs = expand_sweep(sweep, scheme_catalog(), task_catalog());
    CATCH_CHECK(runs.size() == expected_runs);
    std::set<std::string> tasks;
    for (const auto& run : runs) {
      CATCH_INFO(run.id);
      const RunConfig config = load_run_config(sweep.base, run.all_overrides, scheme_catalog(), task_catalog());
      tasks.insert(config.task.name);
      CATCH_CHECK(config.task.format == "causal_lm");
      if (config.seed != 0 || config.encoding.name != "rope") continue;  // one model per task is enough
      auto task = make_task(config.task.name, config.task.options, config.task.format);
      Encoder model = build_model(config, *task);
      CATCH_CHECK_NOTHROW(check_lengths_fit(config, *task, *model));
    }
    // every task of the registry but text (a corpus file) and token_ids (imported models' ids)
    for (const auto& entry : task_registry())
      if (entry.info.name != "text" && entry.info.name != "token_ids") CATCH_CHECK(tasks.count(entry.info.name));
  }
}
