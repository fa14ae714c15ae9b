// Sweep files: grid and zip expansion, run ids, validation.
#include "tests/catch.h"

#include <fstream>

#include "core/config/sweep_config.h"
#include "core/config/yaml_reader.h"
#include "tests/support.h"

using namespace pelab;

namespace {
std::string write_sweep(const test::TemporaryDirectory& dir, const std::string& text) {
  const std::string path = dir.path + "/sweep.yaml";
  std::ofstream(path) << "base: " << test::source_path("configs/quickstart.yaml") << "\n" << text;
  return path;
}
}  // namespace

CATCH_TEST_CASE("sweep: the grid is a cartesian product, zipped axes advance together", "[sweep]") {
  auto sweep = load_sweep_config(test::source_path("tests/fixtures/sweeps/tiny.yaml"));
  CATCH_CHECK(sweep.name == "tiny");
  CATCH_CHECK(sweep.base == test::source_path("configs/quickstart.yaml"));
  auto runs = expand_sweep(sweep, scheme_catalog(), task_catalog());
  CATCH_REQUIRE(runs.size() == 2u * 2u * 2u);
  // the last grid axis varies fastest, then the zip position
  CATCH_CHECK(runs[0].id == "encoding-none_seed-0_max_length-6_lengths-3-6");
  CATCH_CHECK(runs[1].id == "encoding-none_seed-0_max_length-8_lengths-4-8");
  CATCH_CHECK(runs[2].id == "encoding-none_seed-1_max_length-6_lengths-3-6");
  CATCH_CHECK(runs[7].id == "encoding-alibi_seed-1_max_length-8_lengths-4-8");
  CATCH_CHECK(runs[7].overrides == std::vector<std::string>{"encoding.name=alibi", "seed=1", "train.max_length=8",
                                                             "eval.lengths=[4, 8]"});
  CATCH_CHECK(runs[7].all_overrides.front() == "train.steps=4");
  CATCH_CHECK(runs[7].dir == "sweep-out/runs/encoding-alibi_seed-1_max_length-8_lengths-4-8");
  for (size_t i = 0; i < runs.size(); ++i) CATCH_CHECK(runs[i].index == static_cast<int64_t>(i));
  // ids are stable: expanding again gives the same ids in the same order
  auto again = expand_sweep(sweep, scheme_catalog(), task_catalog());
  for (size_t i = 0; i < runs.size(); ++i) CATCH_CHECK(again[i].id == runs[i].id);
}

CATCH_TEST_CASE("sweep: run ids are readable and unique", "[sweep]") {
  CATCH_CHECK(run_id({{"encoding.name", "rope"}, {"seed", "1"}}) == "encoding-rope_seed-1");
  CATCH_CHECK(run_id({{"task.name", "parity_check"}, {"train.max_length", "40"}}) == "task-parity_check_max_length-40");
  CATCH_CHECK(run_id({{"encoding.base", "1e4"}}) == "base-1e4");
  CATCH_CHECK(run_id({}) == "run");
  test::TemporaryDirectory dir;
  // values that sanitize to the same text still get distinct ids
  auto sweep = load_sweep_config(write_sweep(dir, "grid: {model.activation: [\"a b\", \"a/b\"]}\n"));
  auto runs = expand_sweep(sweep, scheme_catalog(), task_catalog(), false);
  CATCH_REQUIRE(runs.size() == 2u);
  CATCH_CHECK(runs[0].id != runs[1].id);
}

CATCH_TEST_CASE("sweep: bad sweep files fail with file:line:col, bad runs name the run", "[sweep]") {
  test::TemporaryDirectory dir;
  CATCH_CHECK_THROWS_WITH(load_sweep_config(write_sweep(dir, "grid: {seed: 3}\n")),
                          test::ContainsText("sweep.yaml:2:14: grid.seed: grid axis 'seed' needs a non-empty list"));
  CATCH_CHECK_THROWS_WITH(
      load_sweep_config(write_sweep(dir, "zip: {seed: [1, 2], train.max_length: [5]}\n")),
      test::ContainsText("zip axes advance together and need lists of one length"));
  CATCH_CHECK_THROWS_WITH(load_sweep_config(write_sweep(dir, "grids: {seed: [1]}\n")),
                          test::ContainsText("unknown key 'grids'"));
  auto sweep = load_sweep_config(write_sweep(dir, "grid: {encoding.name: [rope, rotary]}\n"));
  CATCH_CHECK_THROWS_WITH(expand_sweep(sweep, scheme_catalog(), task_catalog()),
                          Catch::Matchers::StartsWith("sweep value encoding.name=rotary: encoding.name: unknown encoding 'rotary'") &&
                              test::ContainsText("run encoding-rotary"));
  std::ofstream(dir.path + "/no_base.yaml") << "grid: {seed: [1]}\n";
  CATCH_CHECK_THROWS_WITH(load_sweep_config(dir.path + "/no_base.yaml"), test::ContainsText("needs `base:"));
}
