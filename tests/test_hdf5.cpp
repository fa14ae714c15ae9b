#include "tests/catch.h"

#include <filesystem>
#include <fstream>

#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "tests/support.h"

using namespace pelab;

CATCH_TEST_CASE("a test's temporary directory goes with its contents, and not beyond its links", "[support]") {
  test::TemporaryDirectory outside;
  const std::string kept = outside.path + "/kept.txt";
  std::ofstream(kept) << "kept";
  std::string removed;
  {
    test::TemporaryDirectory dir;
    removed = dir.path;
    std::filesystem::create_directories(dir.path + "/a/b");
    std::ofstream(dir.path + "/a/b/file.txt") << "x";
    std::ofstream(dir.path + "/top.txt") << "y";
    std::filesystem::create_symlink(kept, dir.path + "/a/link.txt");
    std::filesystem::create_directory_symlink(outside.path, dir.path + "/outside");
  }
  CATCH_CHECK_FALSE(std::filesystem::exists(removed));
  CATCH_CHECK(std::filesystem::exists(kept));  // links are removed, not followed
}

CATCH_TEST_CASE("a run file round-trips every field", "[hdf5]") {
  test::TemporaryDirectory dir;
  RunRecord r;
  r.run_name = "round trip";
  r.config_yaml = std::string("name: x\nlong: ") + std::string(100000, 'y') + "\n";  // beyond attribute limits
  r.environment = current_environment("cpu");
  r.training_seconds = 12.5;
  r.parameter_counts = {{"head", 10}, {"blocks.0", 90}, {"total", 100}};
  r.training.step = {10, 20};
  r.training.loss = {1.5, 0.25};
  r.training.accuracy = {0.5, 0.875};
  r.training.learning_rate = {1e-3, 5e-4};
  r.training.tokens_per_second = {1000, 2000};
  r.evaluation = {{"none", 5, 10, 64, 0.1, 0.99, 0.9}, {"ntk", 40, 80, 64, 2.0, 0.6, 0.0}};
  r.evaluation[1].step = 300;
  r.evaluation[1].sampler = "randomized";
  r.evaluation[1].positions_max_length = 256;
  r.evaluation[1].untrained = "learned: positions 40..79 never trained";
  r.evaluation_curve = {r.evaluation[0], r.evaluation[1]};
  r.evaluation_curve[0].step = 100;
  r.train_min_length = 1;
  r.train_max_length = 20;
  r.train_steps = 300;
  r.run_sampler = "randomized";
  r.run_positions_max_length = 256;
  r.snapshots = {{100, {{"a.weight", torch::randn({3, 4})}}}, {20, {{"a.weight", torch::randn({3, 4})}}}};
  r.trained_rows = {{"position_encoding.table", "position", 0, {1, 1, 0, 0}}};
  r.checkpoint = {{"a.weight", torch::randn({3, 4})}, {"b.scalar", torch::tensor(2.5f)},
                  {"c.big", torch::randn({70, 80})}};
  const std::string path = dir.path + "/sub/run.h5";
  write_run_file(path, r);
  CATCH_CHECK(std::filesystem::exists(path));
  CATCH_CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  RunRecord back = read_run_file(path);
  CATCH_CHECK(back.run_name == r.run_name);
  CATCH_CHECK(back.config_yaml == r.config_yaml);
  CATCH_CHECK(back.environment.git_commit == r.environment.git_commit);
  CATCH_CHECK(back.environment.torch_version == r.environment.torch_version);
  CATCH_CHECK(back.environment.threads == r.environment.threads);
  CATCH_CHECK(back.training_seconds == 12.5);
  CATCH_CHECK(back.parameter_counts == r.parameter_counts);
  CATCH_CHECK(back.training.step == r.training.step);
  CATCH_CHECK(back.training.loss == r.training.loss);
  CATCH_CHECK(back.training.learning_rate == r.training.learning_rate);
  CATCH_REQUIRE(back.evaluation.size() == 2u);
  CATCH_CHECK(back.evaluation[1].length == 40);
  CATCH_CHECK(back.evaluation[0].method == "none");
  CATCH_CHECK(back.evaluation[1].method == "ntk");
  CATCH_CHECK(back.evaluation[1].sequence_length == 80);
  CATCH_CHECK(back.evaluation[1].per_token_accuracy == 0.6);
  CATCH_CHECK(back.evaluation[0].per_sequence_accuracy == 0.9);
  CATCH_CHECK(back.train_max_length == 20);
  CATCH_CHECK(back.evaluation[0].step == 0);
  CATCH_CHECK(back.evaluation[0].untrained.empty());
  CATCH_CHECK(back.evaluation[1].step == 300);
  CATCH_CHECK(back.evaluation[1].sampler == "randomized");
  CATCH_CHECK(back.evaluation[1].positions_max_length == 256);
  CATCH_CHECK(back.evaluation[1].untrained == r.evaluation[1].untrained);
  CATCH_REQUIRE(back.evaluation_curve.size() == 2u);
  CATCH_CHECK(back.evaluation_curve[0].step == 100);
  CATCH_CHECK(back.evaluation_curve[1].per_token_accuracy == 0.6);
  CATCH_CHECK(back.train_steps == 300);
  CATCH_CHECK(back.run_sampler == "randomized");
  CATCH_CHECK(back.run_positions_max_length == 256);
  CATCH_REQUIRE(back.snapshots.size() == 2u);  // by step
  CATCH_CHECK(back.snapshots[0].first == 20);
  CATCH_CHECK(torch::equal(back.snapshots[0].second[0].second, r.snapshots[1].second[0].second));
  CATCH_REQUIRE(back.trained_rows.size() == 1u);
  CATCH_CHECK(back.trained_rows[0].parameter == "position_encoding.table");
  CATCH_CHECK(back.trained_rows[0].row_kind == "position");
  CATCH_CHECK(back.trained_rows[0].trained == std::vector<uint8_t>{1, 1, 0, 0});
  CATCH_CHECK(read_run_file(path, /*with_checkpoint=*/false).snapshots.empty());
  CATCH_REQUIRE(back.checkpoint.size() == 3u);
  for (const auto& [name, tensor] : r.checkpoint) {
    auto it = std::find_if(back.checkpoint.begin(), back.checkpoint.end(), [&](auto& p) { return p.first == name; });
    CATCH_REQUIRE(it != back.checkpoint.end());
    CATCH_CHECK(torch::equal(it->second, tensor));
  }
}

CATCH_TEST_CASE("rows added to a run file replace only rows made under the same settings", "[hdf5]") {
  EvalResult a{"none", 10, 20, 64, 0.5, 0.9, 0.5};
  a.step = 100;
  EvalResult b = a, c = a, d = a, e = a, f = a;
  b.samples = 128;                      // another sample count
  c.step = 50;                          // another step
  d.sampler = "randomized";             // another sampler
  e.method = "ntk";                     // another method
  f.per_token_accuracy = 0.25;          // the same settings: a recomputation
  const auto merged = merge_evaluation_rows({a}, {b, c, d, e, f});
  CATCH_REQUIRE(merged.size() == 5u);
  CATCH_CHECK(merged[0].per_token_accuracy == 0.25);  // a replaced in place by f
  CATCH_CHECK(merged[1].samples == 128);
  CATCH_CHECK(merged[4].method == "ntk");

  test::TemporaryDirectory dir;
  RunRecord r;
  r.run_name = "x";
  r.config_yaml = "name: x\n";
  r.environment = current_environment("cpu");
  r.parameter_counts = {{"total", 0}};
  r.evaluation = {a};
  r.train_steps = 100;
  r.probes = {{10, 0, 0.5, 0.1, 0.2, 0.3, 0.4, 100}, {10, 1, 0.6, 0.1, 0.2, 0.3, 0.4, 100}};
  r.checkpoint = {{"w", torch::ones({2})}};
  const std::string path = dir.path + "/run.h5";
  write_run_file(path, r);
  RunFileAdditions added;
  added.evaluation = {b, f};
  added.probes = {{10, 0, 0.9, 0.1, 0.2, 0.3, 0.4, 100}, {10, 1, 0.8, 0.1, 0.2, 0.3, 0.4, 100},
                  {20, 0, 0.7, 0.1, 0.2, 0.3, 0.4, 100}};
  add_to_run_file(path, added);
  const RunRecord back = read_run_file(path);
  CATCH_REQUIRE(back.evaluation.size() == 2u);
  CATCH_CHECK(back.evaluation[0].per_token_accuracy == 0.25);
  CATCH_CHECK(back.evaluation[1].samples == 128);
  CATCH_CHECK(back.train_steps == 100);  // the attributes stay
  CATCH_REQUIRE(back.probes.size() == 3u);  // length 10's two layers replaced, length 20 added
  CATCH_CHECK(back.probes[0].position_accuracy == 0.9);
  CATCH_CHECK(back.probes[2].length == 20);
  CATCH_CHECK(torch::equal(back.checkpoint[0].second, torch::ones({2})));
  CATCH_CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

CATCH_TEST_CASE("reading a missing or foreign file is a clear error", "[hdf5]") {
  test::TemporaryDirectory dir;
  CATCH_CHECK_THROWS_WITH(read_run_file(dir.path + "/none.h5"), test::ContainsText("does not exist"));
  const std::string text = dir.path + "/text.h5";
  std::ofstream(text) << "not hdf5";
  CATCH_CHECK_THROWS_WITH(read_run_file(text), Catch::Matchers::StartsWith("cannot read HDF5 run file " + text));
}

CATCH_TEST_CASE("loading a checkpoint into another model names the mismatch", "[hdf5]") {
  test::TemporaryDirectory dir;
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config();
  torch::manual_seed(0);
  Encoder small(config.model, config.encoding, task->vocab_size(), task->num_classes());
  RunRecord r;
  r.checkpoint = checkpoint_of(*small);
  write_run_file(dir.path + "/run.h5", r);

  auto wider = test::tiny_config({"model.d_model=64"});
  Encoder big(wider.model, wider.encoding, task->vocab_size(), task->num_classes());
  CATCH_CHECK_THROWS_WITH(load_checkpoint(dir.path + "/run.h5", *big),
                          test::ContainsText("checkpoint tensor 'token_embedding.weight' has shape [4, 32], "
                                                    "the model expects [4, 64]"));
  auto learned = test::tiny_config({"encoding.name=learned"});
  Encoder with_table(learned.model, learned.encoding, task->vocab_size(), task->num_classes());
  CATCH_CHECK_THROWS_WITH(load_checkpoint(dir.path + "/run.h5", *with_table),
                          test::ContainsText("checkpoint has no tensor 'position_encoding.table'"));
}

CATCH_TEST_CASE("parameter counts group by module and add up", "[hdf5]") {
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config({"encoding.name=learned", "encoding.max_positions=16"});
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  auto counts = count_parameters(*model);
  CATCH_CHECK(counts.at("position_encoding") == 16 * 32);
  CATCH_CHECK(counts.at("token_embedding") == 4 * 32);
  CATCH_CHECK(counts.at("head") == 32 * 2 + 2);
  CATCH_CHECK(counts.count("blocks.0") == 1);
  CATCH_CHECK(counts.count("blocks.1") == 1);
  int64_t sum = 0;
  for (const auto& [name, n] : counts)
    if (name != schema::kTotal) sum += n;
  CATCH_CHECK(sum == counts.at(schema::kTotal));
  int64_t direct = 0;
  for (const auto& p : model->parameters()) direct += p.numel();
  CATCH_CHECK(direct == counts.at(schema::kTotal));
}
