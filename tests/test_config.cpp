// Config validation: every error names file:line:col (1-based) and the allowed values.
#include "tests/catch.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "core/config/catalog_yaml.h"
#include "core/config/run_name.h"
#include "core/config/yaml_reader.h"
#include "tests/support.h"

using namespace pelab;

namespace {

RunConfig load_fixture(const std::string& name, const std::vector<std::string>& overrides = {}) {
  return load_run_config(test::source_path("tests/fixtures/" + name), overrides, scheme_catalog(), task_catalog());
}

std::string error_of(const std::string& fixture, const std::vector<std::string>& overrides = {}) {
  try {
    load_fixture(fixture, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string known_schemes() {
  std::vector<std::string> names;
  for (const auto& e : scheme_catalog()) names.push_back(e.name);
  return join(names);
}

std::string known_tasks() {
  std::vector<std::string> names;
  for (const auto& e : task_catalog()) names.push_back(e.name);
  return join(names);
}

std::string prefix(const std::string& fixture) { return test::source_path("tests/fixtures/" + fixture); }

}  // namespace

CATCH_TEST_CASE("a valid config loads with defaults filled in", "[config]") {
  RunConfig c = load_fixture("valid.yaml");
  CATCH_CHECK(c.name == "valid");
  CATCH_CHECK(c.encoding.name == "learned");
  CATCH_CHECK(c.encoding.options.get_int("max_positions") == 64);
  CATCH_CHECK(c.encoding.options.get_string("inject") == "input");  // default
  CATCH_CHECK(c.model.d_model == 32);
  CATCH_CHECK(c.model.norm == "pre");
  CATCH_CHECK(c.train.max_length == 8);
  CATCH_CHECK(c.eval.lengths == std::vector<int64_t>{4, 8, 16});
  CATCH_CHECK(c.output.dir == "runs/valid");
}

CATCH_TEST_CASE("the shipped task-family configs are valid", "[config]") {
  for (const char* family : {"regular", "dcf", "cs"}) {
    CATCH_INFO(family);
    RunConfig c = load_run_config(test::source_path(std::string("configs/tasks/") + family + ".yaml"), {},
                                  scheme_catalog(), task_catalog());
    CATCH_CHECK(c.train.max_length == 40);
    CATCH_CHECK(c.task.format == "encoder");
  }
  // the benchmark's tiny shape (tests/benchmarks/tiny_shape.py): Ruoss et al.'s model and batch
  RunConfig tiny = load_run_config(test::source_path("configs/bench/tiny_shape.yaml"), {}, scheme_catalog(),
                                   task_catalog());
  CATCH_CHECK((tiny.model.d_model == 64 && tiny.model.num_layers == 5 && tiny.model.num_heads == 8 &&
               tiny.train.batch_size == 128 && tiny.train.max_length == 40));
  RunConfig nope = load_run_config(test::source_path("configs/tasks/nope.yaml"), {}, scheme_catalog(), task_catalog());
  CATCH_CHECK(nope.task.format == "causal_lm");
  CATCH_CHECK(nope.model.causal);
  for (const char* format : {"causal_lm", "masked_lm"}) {
    CATCH_INFO(format);
    RunConfig text = load_run_config(test::source_path(std::string("configs/text/") + format + ".yaml"), {},
                                     scheme_catalog(), task_catalog());
    CATCH_CHECK(text.task.name == "text");
    CATCH_CHECK(text.task.format == format);
    CATCH_CHECK(text.eval.lengths.back() == 16 * text.train.max_length);
  }
}

CATCH_TEST_CASE("the quickstart config is valid", "[config]") {
  RunConfig c = load_run_config(test::source_path("configs/quickstart.yaml"), {}, scheme_catalog(), task_catalog());
  CATCH_CHECK(c.task.name == "reverse_string");
  CATCH_CHECK(c.train.min_length == 1);
  CATCH_CHECK(c.train.max_length == 20);
  CATCH_CHECK(c.eval.lengths.back() > c.train.max_length);
}

namespace {

// The ```yaml block under docs/configuration.md's "## Every key" heading.
std::string documented_run_config() {
  std::ifstream file(test::source_path("docs/configuration.md"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const size_t heading = doc.find("\n## Every key\n");
  CATCH_REQUIRE(heading != std::string::npos);
  const size_t begin = doc.find("```yaml\n", heading);
  CATCH_REQUIRE(begin != std::string::npos);
  const size_t end = doc.find("```", begin + 8);
  CATCH_REQUIRE(end != std::string::npos);
  return doc.substr(begin + 8, end - begin - 8);
}

// Every key path of the maps in `node` ("train.steps"), except below `skip` (options whose
// keys depend on the scheme or task).
void key_paths(const YAML::Node& node, const std::string& prefix, const std::set<std::string>& skip,
               std::set<std::string>& out) {
  for (const auto& entry : node) {
    const std::string path = prefix + entry.first.as<std::string>();
    out.insert(path);
    if (entry.second.IsMap() && !skip.count(path)) key_paths(entry.second, path + ".", skip, out);
  }
}

}  // namespace

CATCH_TEST_CASE("docs/configuration.md's run config is valid and names every key a resolved config has", "[config]") {
  const std::string documented = documented_run_config();
  const RunConfig c = parse_run_config(documented, "docs/configuration.md", {}, scheme_catalog(), task_catalog());
  CATCH_CHECK(c.name == "quickstart");
  const std::set<std::string> options = {"task", "encoding"};  // a scheme's or task's own keys: pelab list
  std::set<std::string> in_doc, resolved;
  key_paths(YAML::Load(documented), "", options, in_doc);
  key_paths(YAML::Load(to_yaml(c)), "", options, resolved);
  std::vector<std::string> undocumented, unknown;
  std::set_difference(resolved.begin(), resolved.end(), in_doc.begin(), in_doc.end(),
                      std::back_inserter(undocumented));
  std::set_difference(in_doc.begin(), in_doc.end(), resolved.begin(), resolved.end(),
                      std::back_inserter(unknown));
  // task and encoding: their name is documented, their options are the example's
  undocumented.erase(std::remove_if(undocumented.begin(), undocumented.end(),
                                    [](const std::string& k) { return k.rfind("task.", 0) == 0 || k.rfind("encoding.", 0) == 0; }),
                     undocumented.end());
  CATCH_INFO("in a resolved config, not in docs/configuration.md: " << join(undocumented));
  CATCH_INFO("in docs/configuration.md, not in a resolved config: " << join(unknown));
  CATCH_CHECK(undocumented.empty());
  CATCH_CHECK(unknown.empty());
}

CATCH_TEST_CASE("config errors point at file:line:col", "[config]") {
  CATCH_CHECK(error_of("unknown_scheme.yaml") ==
              prefix("unknown_scheme.yaml") + ":5:9: encoding.name: unknown encoding 'rotary'; known encodings: " +
                                              known_schemes());
  CATCH_CHECK(error_of("unknown_key.yaml") ==
              prefix("unknown_key.yaml") + ":4:3: unknown key 'model.d_modle' in model (did you mean 'd_model'?); allowed keys: activation, "
                                           "attention_dropout, causal, chunk, d_ff, d_model, dropout, embedding_init_std, "
                                           "embedding_layer_norm, embedding_scale, global_every, layer_norm_eps, "
                                           "llama4_floor_scale, llama4_scale, logit_scale, logit_scaling, logit_scaling_blocks, "
                                           "norm, num_heads, num_layers, segment_embeddings, "
                                           "ssmax_init, window");
  CATCH_CHECK(error_of("wrong_type.yaml") ==
              prefix("wrong_type.yaml") + ":6:15: train.batch_size: expected an integer, got 'many'");
  CATCH_CHECK(error_of("out_of_range.yaml") ==
              prefix("out_of_range.yaml") + ":4:12: model.dropout: 1.5 is out of range: must be in [0, 0.99]");
  CATCH_CHECK(error_of("bad_choice.yaml") ==
              prefix("bad_choice.yaml") + ":5:11: encoding.layout: 'zigzag' is not allowed; expected one of: "
                                          "interleaved, concatenated, concatenated_t2t");
  CATCH_CHECK(error_of("unknown_option.yaml") ==
              prefix("unknown_option.yaml") + ":4:3: unknown key 'encoding.max_position' in encoding 'learned' "
                                              "(did you mean 'max_positions'?); allowed keys: init_std, inject, max_positions, name");
  CATCH_CHECK(error_of("heads_not_dividing.yaml") ==
              prefix("heads_not_dividing.yaml") + ":4:14: model.num_heads: 3 heads do not divide d_model = 32");
  CATCH_CHECK(error_of("bad_list.yaml") ==
              prefix("bad_list.yaml") + ":3:21: eval.lengths[2]: expected an integer, got 'long'");
  CATCH_CHECK(error_of("unknown_task.yaml") ==
              prefix("unknown_task.yaml") + ":2:9: task.name: unknown task 'reverse_strings'; known tasks: " +
                                            known_tasks());
  CATCH_CHECK(error_of("not_a_mapping.yaml") ==
              prefix("not_a_mapping.yaml") + ":2:8: model: must be a mapping of key: value, got 'big'");
}

CATCH_TEST_CASE("invalid YAML syntax is reported with its position", "[config]") {
  CATCH_CHECK_THAT(error_of("bad_syntax.yaml"), Catch::Matchers::StartsWith(prefix("bad_syntax.yaml") + ":3:") &&
                                                    test::ContainsText("invalid YAML"));
}

CATCH_TEST_CASE("a missing file is a clear error", "[config]") {
  CATCH_CHECK_THAT(error_of("does_not_exist.yaml"), Catch::Matchers::EndsWith("cannot open config file"));
}

CATCH_TEST_CASE("a run name takes the resolved values of the keys in its braces", "[config]") {
  const auto catalogs = [](const std::string& yaml, const std::vector<std::string>& overrides) {
    return parse_run_config(yaml, "named.yaml", overrides, scheme_catalog(), task_catalog());
  };
  const std::string yaml = "name: \"text-{encoding.name}-{model.d_model}\"\nencoding:\n  name: alibi\n";
  RunConfig c = catalogs(yaml, {});
  CATCH_CHECK(c.name == "text-alibi-64");  // d_model: its default
  CATCH_CHECK(c.output.dir == "runs/text-alibi-64");
  CATCH_CHECK(catalogs(yaml, {"encoding.name=rope"}).name == "text-rope-64");
  CATCH_CHECK(name_template_keys("text-{encoding.name}-{model.d_model}") ==
              std::vector<std::string>{"encoding.name", "model.d_model"});
  CATCH_CHECK_THROWS_WITH(catalogs("name: \"run-{encoding.nme}\"\n", {}),
                          test::ContainsText("name: {encoding.nme} in the name is not a config key with a value"));
}

CATCH_TEST_CASE("command-line overrides (--set) change values, and errors name the override", "[config]") {
  RunConfig c = load_fixture("valid.yaml", {"model.d_model=64", "encoding.inject=every_layer", "eval.lengths=[2, 3]"});
  CATCH_CHECK(c.model.d_model == 64);
  CATCH_CHECK(c.encoding.options.get_string("inject") == "every_layer");
  CATCH_CHECK(c.eval.lengths == std::vector<int64_t>{2, 3});
  // an override can add a key that the file does not have
  CATCH_CHECK(load_fixture("valid.yaml", {"train.warmup_steps=7"}).train.warmup_steps == 7);

  CATCH_CHECK(error_of("valid.yaml", {"model.num_layers=two"}) ==
              "--set model.num_layers=two: model.num_layers: expected an integer, got 'two'");
  // a control character (here a carriage return) in a string is refused, not carried into the resolved config
  CATCH_CHECK_THAT(error_of("valid.yaml", {"name=run\r"}), test::ContainsText("name: contains the control character 0x0d"));
  CATCH_CHECK(error_of("valid.yaml", {"encoding.name=alibi_typo"}) ==
              "--set encoding.name=alibi_typo: encoding.name: unknown encoding 'alibi_typo'; known encodings: " +
                  known_schemes());
  CATCH_CHECK(error_of("valid.yaml", {"model.widht=3"}) ==
              "--set model.widht=3: unknown key 'model.widht' in model; allowed keys: activation, attention_dropout, "
              "causal, chunk, d_ff, d_model, dropout, embedding_init_std, embedding_layer_norm, embedding_scale, "
              "global_every, layer_norm_eps, llama4_floor_scale, llama4_scale, logit_scale, logit_scaling, "
              "logit_scaling_blocks, norm, num_heads, num_layers, segment_embeddings, ssmax_init, window");
  CATCH_CHECK(error_of("valid.yaml", {"noequals"}) ==
              "--set noequals: expected key.path=value, e.g. --set model.d_model=128");
  CATCH_CHECK(error_of("valid.yaml", {"model.d_model.x=1"}) ==
              "--set model.d_model.x=1: 'model.d_model' is not a mapping, cannot set 'model.d_model.x'");
  CATCH_CHECK(error_of("valid.yaml", {"seed.x=1"}) == "--set seed.x=1: seed: expected an integer, got a mapping");
  CATCH_CHECK(load_fixture("valid.yaml", {"train.cuda_graphs=off"}).train.cuda_graphs == "off");
  CATCH_CHECK_THAT(error_of("valid.yaml", {"train.nonfinite=skip", "train.cuda_graphs=on"}),
                   test::ContainsText("cuda_graphs: on does not combine with nonfinite: skip"));
}

CATCH_TEST_CASE("the resolved config round-trips through YAML", "[config]") {
  RunConfig c = load_fixture("valid.yaml", {"train.learning_rate=0.000123", "model.causal=true"});
  const std::string yaml = to_yaml(c);
  RunConfig again = parse_run_config(yaml, "resolved.yaml", {}, scheme_catalog(), task_catalog());
  CATCH_CHECK(to_yaml(again) == yaml);
  CATCH_CHECK(again.train.learning_rate == c.train.learning_rate);
  CATCH_CHECK(again.model.causal);
  CATCH_CHECK(again.encoding.options.get_float("init_std") == c.encoding.options.get_float("init_std"));
}

CATCH_TEST_CASE("the catalogs round-trip through YAML (pelab list --yaml, the config fuzzer's input)", "[config]") {
  const Catalogs catalogs{scheme_catalog(), task_catalog()};
  const std::string yaml = catalogs_to_yaml(catalogs);
  const Catalogs again = catalogs_from_yaml(yaml);
  CATCH_CHECK(catalogs_to_yaml(again) == yaml);
  CATCH_REQUIRE(again.schemes.size() == catalogs.schemes.size());
  CATCH_REQUIRE(again.tasks.size() == catalogs.tasks.size());
  for (size_t i = 0; i < catalogs.schemes.size(); ++i) {
    CATCH_CHECK(again.schemes[i].options.size() == catalogs.schemes[i].options.size());
    CATCH_CHECK(again.schemes[i].causal_only == catalogs.schemes[i].causal_only);
  }
  // the same configs are valid, with the same resolved values, and the same ones refused
  const std::string text = "task: {name: addition, base: 7}\nencoding: {name: fire, mlp_width: 16}\n";
  CATCH_CHECK(to_yaml(parse_run_config(text, "a.yaml", {}, again.schemes, again.tasks)) ==
              to_yaml(parse_run_config(text, "a.yaml", {}, catalogs.schemes, catalogs.tasks)));
  CATCH_CHECK_THROWS_WITH(parse_run_config("encoding: {name: rope, base: -3}", "b.yaml", {}, again.schemes, again.tasks),
                          Catch::Matchers::StartsWith("b.yaml:1:"));
  CATCH_CHECK_THROWS_WITH(catalogs_from_yaml("schemes: 3"), Catch::Matchers::StartsWith("not a pelab catalog"));
}
