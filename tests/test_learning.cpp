// The end-to-end learning test: config -> train -> evaluate -> run file.
#include "tests/catch.h"

#include <sstream>

#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "tests/support.h"

using namespace pelab;

CATCH_TEST_CASE("a small seeded model learns reverse_string at its training lengths (>= 95% per token)",
                "[learning]") {
  test::TemporaryDirectory dir;
  RunConfig config = load_run_config(test::source_path("tests/fixtures/learning.yaml"), {"output.dir=" + dir.path},
                                     scheme_catalog(), task_catalog());
  std::ostringstream log;
  RunOutcome outcome = execute_run(config, log, false);
  CATCH_INFO(log.str());
  CATCH_REQUIRE(outcome.evaluation.size() == 6u);
  for (const auto& r : outcome.evaluation) {
    CATCH_INFO("length " << r.length);
    CATCH_CHECK(r.per_token_accuracy >= 0.95);
  }
  // the loss went down, and the run file holds what the run printed
  CATCH_CHECK(outcome.training.loss.back() < 0.5 * outcome.training.loss.front());
  RunRecord record = read_run_file(outcome.run_file);
  CATCH_CHECK(record.evaluation.back().per_token_accuracy == outcome.evaluation.back().per_token_accuracy);
  CATCH_CHECK(record.training.step == outcome.training.step);
  CATCH_CHECK(record.environment.threads == 1);
  CATCH_CHECK_THAT(log.str(), test::ContainsText("token acc") && test::ContainsText("tokens/s"));
}

CATCH_TEST_CASE("causal_lm format: a small causal model learns to copy at its training lengths", "[learning][formats]") {
  test::TemporaryDirectory dir;
  RunConfig config = test::tiny_config(
      {"task.name=copy", "task.vocab_size=4", "task.format=causal_lm", "model.causal=true", "encoding.name=rope",
       "model.d_model=64", "train.steps=600", "train.batch_size=32", "train.min_length=1", "train.max_length=8",
       "train.learning_rate=0.003", "train.log_every=100", "eval.lengths=[4, 8]", "eval.samples=128",
       "eval.batch_size=128", "output.dir=" + dir.path});
  std::ostringstream log;
  RunOutcome outcome = execute_run(config, log, false);
  CATCH_INFO(log.str());
  for (const auto& r : outcome.evaluation) {
    CATCH_INFO("length " << r.length);
    CATCH_CHECK(r.per_token_accuracy >= 0.9);
    CATCH_CHECK(r.per_token_accuracy > r.chance_token_accuracy + 0.5);
  }
  CATCH_CHECK_THAT(log.str(), test::ContainsText("causal_lm: input, separator, output"));
  CATCH_CHECK(read_run_file(outcome.run_file).task_format == "causal_lm");
}

CATCH_TEST_CASE("text: a few hundred steps on English bytes beat the unigram chance level", "[learning][text]") {
  for (const std::string format : {"causal_lm", "masked_lm"}) {
    CATCH_INFO(format);
    test::TemporaryDirectory dir;
    RunConfig config = test::tiny_config(
        {"task.name=text", "task.format=" + format,
         std::string("model.causal=") + (format == "causal_lm" ? "true" : "false"), "encoding.name=alibi",
         "train.steps=300", "train.batch_size=16", "train.curriculum=fixed", "train.max_length=32",
         "train.learning_rate=0.003", "train.log_every=100", "eval.lengths=[32, 128]", "eval.samples=32",
         "eval.batch_size=32", "output.dir=" + dir.path});
    std::ostringstream log;
    RunOutcome outcome = execute_run(config, log, false);
    CATCH_INFO(log.str());
    for (const auto& r : outcome.evaluation) {
      CATCH_INFO("length " << r.length);
      CATCH_CHECK(r.loss < r.chance_loss - 0.1);  // nats per byte below the unigram entropy
    }
    CATCH_CHECK_THAT(log.str(), test::ContainsText("bits/byte"));
    RunRecord record = read_run_file(outcome.run_file);
    CATCH_CHECK(record.task_format == format);
    CATCH_CHECK(record.evaluation_protocol.find("held-out bytes") != std::string::npos);
  }
}
