// The end-to-end learning test: config -> train -> evaluate -> run file.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <sstream>

#include "core/io/hdf5_store.h"
#include "core/run.h"
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
  CATCH_CHECK_THAT(log.str(), Catch::Matchers::Contains("token acc") && Catch::Matchers::Contains("tokens/s"));
}
