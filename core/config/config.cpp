#include "core/config/config.h"
#include "core/config/run_name.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "core/config/yaml_reader.h"

namespace pelab {

const std::vector<std::string>& extrapolation_methods() {
  static const std::vector<std::string> methods = {"none",   "interpolation", "ntk",  "yarn", "dynamic_ntk",
                                                   "rerope", "leaky_rerope",  "clamp"};
  return methods;
}

const std::vector<EvalCondition>& evaluation_conditions() {
  static const std::vector<EvalCondition> conditions = {{"depth", "eval.depths", &EvalConfig::depths},
                                                        {"p_ignore", "eval.p_ignore", &EvalConfig::p_ignore}};
  return conditions;
}

const std::vector<double>& condition_values(const EvalConfig& eval, const std::string& name) {
  static const std::vector<double> none;
  for (const auto& condition : evaluation_conditions())
    if (condition.name == name) return eval.*condition.values;
  return none;
}

namespace {

SchemeFileLoader& scheme_file_loader() {
  static SchemeFileLoader loader;
  return loader;
}

constexpr const char* kNoPython = "this program cannot load Python schemes (pelab was built without Python: install "
                                  "python3-dev and pybind11-dev and rebuild, docs/python-schemes.md)";

// `file` as an absolute path, its links and dots resolved
std::string absolute_path(const std::filesystem::path& file) {
  std::error_code error;
  return std::filesystem::weakly_canonical(std::filesystem::absolute(file), error).string();
}

}  // namespace

void set_scheme_file_loader(SchemeFileLoader loader) { scheme_file_loader() = std::move(loader); }
bool has_scheme_file_loader() { return static_cast<bool>(scheme_file_loader()); }

Catalog load_scheme_files(const std::vector<std::string>& files) {
  if (files.empty()) return {};
  if (!has_scheme_file_loader()) throw ConfigError(kNoPython);
  Catalog all;
  for (const auto& file : files) {
    const std::string absolute = absolute_path(file);
    if (!std::filesystem::is_regular_file(absolute)) throw ConfigError(file + ": no such Python file");
    try {
      for (auto& entry : scheme_file_loader()({absolute})) all.push_back(std::move(entry));
    } catch (const std::exception& e) {
      throw ConfigError(e.what());
    }
  }
  return all;
}

namespace {

// `file:line:col` of a node (1-based), for errors at one element of a list.
std::string node_location(const YAML::Node& node, const YamlSource& source) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return source.file;
  return source.file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

// The top-level `schemes:` (a file or a list of files, relative to the config file) as absolute
// paths, loaded: their schemes' catalog entries are appended to `schemes`.
std::vector<std::string> read_scheme_files(YamlReader& r, const YamlSource& source, Catalog& schemes) {
  const YAML::Node node = r.get_node("schemes");
  if (!node || node.IsNull()) return {};
  std::vector<YAML::Node> items;
  if (node.IsScalar()) items.push_back(node);
  else if (node.IsSequence()) for (const auto& item : node) items.push_back(item);
  else r.fail_at("schemes", "expected a Python file or a list of them, e.g. [my/decay.py]");
  namespace fs = std::filesystem;
  const fs::path config_dir = fs::path(source.file).parent_path();
  const bool relative_to_config = !source.file.empty() && fs::is_regular_file(source.file);
  std::vector<std::string> files;
  for (const auto& item : items) {
    if (!item.IsScalar() || item.Scalar().empty())
      throw ConfigError(node_location(item, source) + ": schemes: expected the path of a Python file");
    fs::path file(item.Scalar());
    if (file.is_relative() && relative_to_config) file = config_dir / file;
    const std::string absolute = absolute_path(file);
    if (!fs::is_regular_file(absolute))
      throw ConfigError(node_location(item, source) + ": schemes: " + absolute +
                        " does not exist (paths are relative to the config file)");
    files.push_back(absolute);
  }
  if (!has_scheme_file_loader()) r.fail_at("schemes", kNoPython);
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      for (auto& entry : scheme_file_loader()({files[i]})) {
        schemes.erase(std::remove_if(schemes.begin(), schemes.end(),
                                     [&](const CatalogEntry& e) { return e.name == entry.name; }),
                      schemes.end());
        schemes.push_back(std::move(entry));
      }
    } catch (const std::exception& e) {
      throw ConfigError(node_location(items[i], source) + ": schemes: " + e.what());
    }
  }
  return files;
}

std::vector<std::string> names_of(const Catalog& catalog) {
  std::vector<std::string> names;
  for (const auto& e : catalog) names.push_back(e.name);
  return names;
}

// Reads a `{name: ..., <options>}` section against a catalog (schemes or tasks).
template <typename Section, typename Check>
Section read_named_section(YamlReader reader, const std::string& what, const Catalog& catalog,
                           const std::string& default_name, Check&& check) {
  Section section;  // `check` may read further keys (task.format)
  section.name = reader.get_string("name", default_name);
  const CatalogEntry* entry = nullptr;
  for (const auto& e : catalog)
    if (e.name == section.name) entry = &e;
  if (!entry)
    reader.fail_at("name", "unknown " + what + " '" + section.name + "'; known " + what + "s: " +
                               join(names_of(catalog)));
  section.options = reader.get_options(entry->options);
  check(*entry, reader, section);
  reader.finish(what + " '" + section.name + "'");
  return section;
}

ModelConfig read_model(YamlReader r) {
  ModelConfig m;
  m.d_model = r.get_int("d_model", m.d_model, 1, 65536);
  m.num_layers = r.get_int("num_layers", m.num_layers, 1, 1024);
  m.num_heads = r.get_int("num_heads", m.num_heads, 1, 1024);
  m.d_ff = r.get_int("d_ff", m.d_ff, 1, 1 << 20);
  m.dropout = r.get_float("dropout", m.dropout, 0.0, 0.99);
  m.attention_dropout = r.get_float("attention_dropout", m.attention_dropout, 0.0, 0.99);
  m.activation = r.get_choice("activation", m.activation, {"gelu", "relu"});
  m.logit_scaling = r.get_choice("logit_scaling", m.logit_scaling,
                                 {"none", "log_length", "ssmax", "constant", "per_head", "llama4"});
  m.ssmax_init = r.get_float("ssmax_init", m.ssmax_init, -100.0, 100.0);
  m.logit_scale = r.get_float("logit_scale", m.logit_scale, -100.0, 100.0);
  m.llama4_floor_scale = r.get_float("llama4_floor_scale", m.llama4_floor_scale, 1.0, 1e12);
  m.llama4_scale = r.get_float("llama4_scale", m.llama4_scale, 0.0, 100.0);
  m.norm = r.get_choice("norm", m.norm, {"pre", "post"});
  m.causal = r.get_bool("causal", m.causal);
  m.segment_embeddings = r.get_bool("segment_embeddings", m.segment_embeddings);
  m.embedding_layer_norm = r.get_bool("embedding_layer_norm", m.embedding_layer_norm);
  m.embedding_init_std = r.get_float("embedding_init_std", m.embedding_init_std, 0.0, 10.0);
  m.embedding_scale = r.get_choice("embedding_scale", m.embedding_scale, {"none", "sqrt_d_model"});
  m.layer_norm_eps = r.get_float("layer_norm_eps", m.layer_norm_eps, 0.0, 1.0);
  if (m.d_model % m.num_heads != 0)
    r.fail_at("num_heads", std::to_string(m.num_heads) + " heads do not divide d_model = " +
                               std::to_string(m.d_model));
  m.window = r.get_int("window", m.window, 0, 1 << 30);
  m.chunk = r.get_int("chunk", m.chunk, 0, 1 << 30);
  m.global_every = r.get_int("global_every", m.global_every, 0, 1 << 16);
  if (m.global_every == 1) r.fail_at("global_every", "1 makes every block global; give 2 or more, or 0 (every block local)");
  m.logit_scaling_blocks = r.get_choice("logit_scaling_blocks", m.logit_scaling_blocks, {"all", "global"});
  if (m.window > 0 && m.chunk > 0) r.fail_at("chunk", "give window (a sliding window) or chunk (blocks), not both");
  const bool local = m.window > 0 || m.chunk > 0;
  if (m.global_every > 0 && !local)
    r.fail_at("global_every", "names the blocks that attend globally among local ones; set window or chunk");
  if (m.logit_scaling_blocks == "global" && (!local || m.global_every == 0))
    r.fail_at("logit_scaling_blocks", "global scales only the blocks that attend globally: set window or chunk, "
                                      "and global_every");
  if (m.logit_scaling_blocks == "global" && m.logit_scaling == "none")
    r.fail_at("logit_scaling_blocks", "there is no logit_scaling to restrict; set logit_scaling");
  r.finish("model");
  return m;
}

// train.phases: each phase takes `share` of train.steps or `steps`, exactly one of them (the
// last may give neither: the rest); lengths and curriculum default to train's. Sets
// train.min_length / max_length to the phases' smallest and largest.
void read_phases(YamlReader& r, TrainConfig& t) {
  auto phases = r.children("phases");
  if (!r.has("phases")) return;
  if (phases.empty()) r.fail_at("phases", "must list at least one phase");
  int64_t assigned = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    auto& p = phases[i];
    TrainPhase phase;
    const bool has_share = p.has("share"), has_steps = p.has("steps"), last = i + 1 == phases.size();
    if (has_share && has_steps) p.fail_at("steps", "give share or steps, not both");
    if (!has_share && !has_steps && !last)
      p.fail_at("share", "every phase but the last needs share (of train.steps) or steps");
    const double share = p.get_float("share", 0.0, 0.0, 1.0);
    phase.steps = has_steps ? p.get_int("steps", 0, 1, 1e12)
                  : has_share ? static_cast<int64_t>(std::llround(share * static_cast<double>(t.steps)))
                              : t.steps - assigned;
    phase.min_length = p.get_int("min_length", t.min_length, 1, 1 << 24);
    phase.max_length = p.get_int("max_length", t.max_length, 1, 1 << 24);
    phase.curriculum = p.get_choice("curriculum", t.curriculum, {"uniform", "fixed", "increasing"});
    phase.increase_every = p.get_int("increase_every", t.increase_every, 1, 1e12);
    phase.increase_by = p.get_int("increase_by", t.increase_by, 1, 1 << 24);
    if (phase.min_length > phase.max_length)
      p.fail_at("min_length", "min_length = " + std::to_string(phase.min_length) + " is larger than max_length = " +
                                  std::to_string(phase.max_length));
    if (phase.steps < 1) p.fail_at(has_steps ? "steps" : "share", "the phase gets no step of train.steps = " +
                                                                      std::to_string(t.steps));
    p.finish(p.path());
    assigned += phase.steps;
    t.phases.push_back(phase);
  }
  if (assigned != t.steps)
    r.fail_at("phases", "the phases' steps add up to " + std::to_string(assigned) + ", not train.steps = " +
                            std::to_string(t.steps));
  t.min_length = t.phases.front().min_length;
  t.max_length = t.phases.front().max_length;
  for (const auto& phase : t.phases) {
    t.min_length = std::min(t.min_length, phase.min_length);
    t.max_length = std::max(t.max_length, phase.max_length);
  }
}

TrainConfig read_train(YamlReader r) {
  TrainConfig t;
  t.steps = r.get_int("steps", t.steps, 0, 1e12);  // 0: evaluate the initialization (or an import)
  t.batch_size = r.get_int("batch_size", t.batch_size, 1, 1 << 20);
  t.min_length = r.get_int("min_length", t.min_length, 1, 1 << 24);
  t.max_length = r.get_int("max_length", t.max_length, 1, 1 << 24);
  t.curriculum = r.get_choice("curriculum", t.curriculum, {"uniform", "fixed", "increasing"});
  t.increase_every = r.get_int("increase_every", t.increase_every, 1, 1e12);
  t.increase_by = r.get_int("increase_by", t.increase_by, 1, 1 << 24);
  t.optimizer = r.get_choice("optimizer", t.optimizer, {"adam", "adamw"});
  t.learning_rate = r.get_float("learning_rate", t.learning_rate, 0.0, 100.0);
  t.weight_decay = r.get_float("weight_decay", t.weight_decay, 0.0, 10.0);
  t.beta1 = r.get_float("beta1", t.beta1, 0.0, 0.999999);
  t.beta2 = r.get_float("beta2", t.beta2, 0.0, 0.999999);
  t.eps = r.get_float("eps", t.eps, 0.0, 1.0);
  t.warmup_steps = r.get_int("warmup_steps", t.warmup_steps, 0, 1e12);
  t.schedule = r.get_choice("schedule", t.schedule, {"constant", "cosine"});
  t.min_learning_rate = r.get_float("min_learning_rate", t.min_learning_rate, 0.0, 100.0);
  t.grad_clip = r.get_float("grad_clip", t.grad_clip, 0.0, 1e9);
  t.nonfinite = r.get_choice("nonfinite", t.nonfinite, {"stop", "skip"});
  t.log_every = r.get_int("log_every", t.log_every, 1, 1e12);
  t.sync_every = r.get_int("sync_every", t.sync_every, 0, 1 << 20);
  t.cuda_graphs = r.get_choice("cuda_graphs", t.cuda_graphs, {"auto", "on", "off"});
  if (t.cuda_graphs == "on" && t.nonfinite == "skip")
    r.fail_at("cuda_graphs", "cuda_graphs: on does not combine with nonfinite: skip, which reads each step's loss "
                             "before updating; set cuda_graphs: auto or off");
  t.checkpoint_every = r.get_int("checkpoint_every", t.checkpoint_every, 0, 1e12);
  t.unused_parameters = r.get_choice("unused_parameters", t.unused_parameters, {"error", "warn"});
  t.unused_parameters_steps = r.get_int("unused_parameters_steps", t.unused_parameters_steps, 1, 1e12);
  if (t.min_length > t.max_length)
    r.fail_at("min_length", "min_length = " + std::to_string(t.min_length) +
                                " is larger than max_length = " + std::to_string(t.max_length));
  read_phases(r, t);
  if (t.min_learning_rate > t.learning_rate)
    r.fail_at("min_learning_rate", "must not exceed learning_rate");
  r.finish("train");
  return t;
}

PositionsConfig read_positions(YamlReader r) {
  PositionsConfig p;
  p.sampler = r.get_choice("sampler", p.sampler, {"contiguous", "random_offset", "randomized", "cape", "random_float"});
  p.max_length = r.get_int("max_length", p.max_length, 1, 1 << 30);
  p.evaluate_with = r.get_choice("evaluate_with", p.evaluate_with, {"sampler", "contiguous"});
  p.global_shift = r.get_float("global_shift", p.global_shift, 0.0, 1e9);
  p.local_shift = r.get_float("local_shift", p.local_shift, 0.0, 1e9);
  p.global_scaling = r.get_float("global_scaling", p.global_scaling, 1.0, 1e9);
  r.finish("positions");
  return p;
}

EvalConfig read_eval(YamlReader r) {
  EvalConfig e;
  e.lengths = r.get_int_list("lengths", e.lengths, 1, 1 << 24);
  e.extrapolation = r.get_choice_list("extrapolation", e.extrapolation, extrapolation_methods());
  e.samples = r.get_int("samples", e.samples, 1, 1e9);
  e.batch_size = r.get_int("batch_size", e.batch_size, 1, 1 << 20);
  e.every = r.get_int("every", e.every, 0, 1e12);
  YAML::Node every_lengths = r.get_node("every_lengths");  // empty (the resolved default): lengths
  if (every_lengths && !(every_lengths.IsSequence() && every_lengths.size() == 0))
    e.every_lengths = r.get_int_list("every_lengths", e.every_lengths, 1, 1 << 24);
  e.every_samples = r.get_int("every_samples", e.every_samples, 1, 1e9);
  e.depths = r.get_float_list("depths", e.depths, 0.0, 1.0);
  e.p_ignore = r.get_float_list("p_ignore", e.p_ignore, 0.0, 0.999);
  r.finish("eval");
  return e;
}

AnalysisConfig read_analysis(YamlReader r) {
  AnalysisConfig a;
  a.attention_statistics = r.get_bool("attention_statistics", a.attention_statistics);
  // an empty list (as the resolved config writes the defaults) means the default
  auto optional_lengths = [&](const char* key) -> std::vector<int64_t> {
    YAML::Node node = r.get_node(key);
    if (!node || node.IsNull() || (node.IsSequence() && node.size() == 0)) return {};
    return r.get_int_list(key, {}, 1, 1 << 24);
  };
  a.attention_lengths = optional_lengths("attention_lengths");
  a.attention_examples = r.get_int("attention_examples", a.attention_examples, 0, 1 << 20);
  a.attention_float16 = r.get_bool("attention_float16", a.attention_float16);
  a.probes = r.get_bool("probes", a.probes);
  a.probe_lengths = optional_lengths("probe_lengths");
  a.probe_examples = r.get_int("probe_examples", a.probe_examples, 2, 1 << 20);
  a.probe_ridge = r.get_float("probe_ridge", a.probe_ridge, 0.0, 1e6);
  r.finish("analysis");
  return a;
}

void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out);

// encoding_heads: a list of {num_heads: N, name: scheme, its options}, the heads summing to
// model.num_heads; `encoding` must stay none (the groups replace it).
std::vector<HeadGroupConfig> read_head_groups(YamlReader& r, const Catalog& schemes, const ModelConfig& model,
                                              const std::string& encoding_name) {
  auto entries = r.children("encoding_heads");
  if (!r.has("encoding_heads") || entries.empty()) return {};
  if (encoding_name != "none")
    r.fail_at("encoding_heads", "the head groups replace encoding; leave encoding at none (it is '" + encoding_name +
                                    "')");
  std::vector<HeadGroupConfig> groups;
  int64_t heads = 0;
  for (auto& entry : entries) {
    HeadGroupConfig group;
    group.encoding = read_named_section<EncodingConfig>(
        entry, "encoding", schemes, "none", [&](const CatalogEntry& e, YamlReader& reader, EncodingConfig&) {
          if (!reader.has("num_heads")) reader.fail_at("name", "every head group needs num_heads (its heads)");
          group.heads = reader.get_int("num_heads", 0, 1, model.num_heads);
          if (e.causal_only && !model.causal)
            reader.fail_at("name", "'" + e.name + "' is defined for causal attention only; set model.causal: true");
        });
    heads += group.heads;
    groups.push_back(group);
  }
  if (heads != model.num_heads)
    r.fail_at("encoding_heads", "the groups have " + std::to_string(heads) + " heads; model.num_heads is " +
                                    std::to_string(model.num_heads));
  return groups;
}

}  // namespace

std::vector<std::string> name_template_keys(const std::string& name) {
  std::vector<std::string> keys;
  for (size_t open = name.find('{'); open != std::string::npos; open = name.find('{', open + 1)) {
    const size_t close = name.find('}', open);
    if (close == std::string::npos) break;
    keys.push_back(name.substr(open + 1, close - open - 1));
  }
  return keys;
}

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source_name,
                           const std::vector<std::string>& overrides, const Catalog& schemes,
                           const Catalog& tasks, const std::string& overrides_via) {
  auto source = std::make_shared<YamlSource>();
  source->file = source_name;
  YAML::Node root = parse_yaml(yaml_text, source_name);
  for (const auto& assignment : overrides) apply_override(root, assignment, *source, overrides_via);

  YamlReader r(root, source, "");
  RunConfig c;
  c.name = r.get_string("name", std::filesystem::path(source_name).stem().string());
  c.seed = r.get_int("seed", c.seed, 0, 9.2e18);
  c.threads = r.get_int("threads", c.threads, 0, 4096);
  c.device = r.get_choice("device", c.device, {"cpu", "cuda", "auto"});
  c.precision = r.get_choice("precision", c.precision, {"fp32", "bf16"});
  c.model = read_model(r.child("model"));
  Catalog schemes_here = schemes;  // with the schemes of the config's Python files
  c.scheme_files = read_scheme_files(r, *source, schemes_here);
  c.task = read_named_section<TaskConfig>(
      r.child("task"), "task", tasks, c.task.name, [&](const CatalogEntry& e, YamlReader& reader, TaskConfig& task) {
        if (e.formats.empty()) return;
        task.format = reader.get_choice("format", e.formats.front(), e.formats);
        if (task.format == "causal_lm" && !c.model.causal)
          reader.fail_at("format", "causal_lm (next-token prediction) needs causal attention; set model.causal: true");
        if (task.format == "masked_lm" && c.model.causal)
          reader.fail_at("format", "masked_lm (BERT-style) needs bidirectional attention; set model.causal: false");
        task.bos = reader.get_bool("bos", false);
        const bool algorithmic = std::find(e.formats.begin(), e.formats.end(), "encoder") != e.formats.end();
        if (task.bos && (task.format != "causal_lm" || !algorithmic))
          reader.fail_at("bos", "a beginning-of-sequence token is offered for the algorithmic tasks' causal_lm "
                                "format; this task is in format " + task.format);
      });
  c.encoding = read_named_section<EncodingConfig>(
      r.child("encoding"), "encoding", schemes_here, c.encoding.name, [&](const CatalogEntry& e, YamlReader& reader, EncodingConfig&) {
        if (e.causal_only && !c.model.causal)
          reader.fail_at("name", "'" + e.name + "' is defined for causal attention only; set model.causal: true");
      });
  int64_t mix_every = 0;
  c.encoding_mix.encoding = read_named_section<EncodingConfig>(
      r.child("encoding_mix"), "encoding", schemes_here, "none", [&](const CatalogEntry& e, YamlReader& reader, EncodingConfig&) {
        mix_every = reader.get_int("every", 0, 0, 1 << 16);
        if (e.causal_only && !c.model.causal)
          reader.fail_at("name", "'" + e.name + "' is defined for causal attention only; set model.causal: true");
      });
  c.encoding_mix.every = mix_every;
  c.encoding_heads = read_head_groups(r, schemes_here, c.model, c.encoding.name);
  c.positions = read_positions(r.child("positions"));
  c.train = read_train(r.child("train"));
  c.eval = read_eval(r.child("eval"));
  c.analysis = read_analysis(r.child("analysis"));
  // `name: text-{encoding.name}`: the resolved values of the keys named in braces
  if (c.name.find('{') != std::string::npos) {
    std::map<std::string, std::string> values;
    flatten(YAML::Load(to_yaml(c)), "", values);
    std::string expanded = c.name;
    for (const auto& key : name_template_keys(c.name)) {
      auto found = values.find(key);
      if (found == values.end()) r.fail_at("name", "{" + key + "} in the name is not a config key with a value");
      const std::string placeholder = "{" + key + "}";
      expanded.replace(expanded.find(placeholder), placeholder.size(), found->second);
    }
    c.name = expanded;
  }
  YamlReader out = r.child("output");
  c.output.dir = out.get_string("dir", "runs/" + c.name);
  YAML::Node keep = out.get_node("keep_checkpoints");
  if (keep && !(keep.IsSequence() && keep.size() == 0)) {
    c.output.keep_checkpoints = out.get_int_list("keep_checkpoints", {}, 1, 1e12);
    for (int64_t step : c.output.keep_checkpoints)
      if (step > c.train.steps)
        out.fail_at("keep_checkpoints", "step " + std::to_string(step) + " is beyond train.steps = " +
                                            std::to_string(c.train.steps));
  }
  out.finish("output");
  r.finish("the run config");
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          const Catalog& schemes, const Catalog& tasks, const std::string& overrides_via) {
  return parse_run_config(read_config_file(path, "config file"), path, overrides, schemes, tasks, overrides_via);
}

namespace {

void emit_value(YAML::Emitter& out, const OptionValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) out << *b;
  else if (const int64_t* i = std::get_if<int64_t>(&v)) out << *i;
  else if (const double* d = std::get_if<double>(&v)) out << *d;
  else out << std::get<std::string>(v);
}

// `extra`: keys of the section's own after the name (task.format, encoding_mix.every)
// A scheme's or task's options as keys of the mapping being written.
void emit_options(YAML::Emitter& out, const OptionValues& options) {
  for (const auto& [k, v] : options.all()) {
    out << YAML::Key << k << YAML::Value;
    emit_value(out, v);
  }
}

void emit_named(YAML::Emitter& out, const std::string& key, const std::string& name,
                const OptionValues& options, const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  out << YAML::Key << key << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << name;
  for (const auto& [k, v] : extra) out << YAML::Key << k << YAML::Value << v;
  emit_options(out, options);
  out << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const RunConfig& c) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.name;
  out << YAML::Key << "seed" << YAML::Value << c.seed;
  out << YAML::Key << "threads" << YAML::Value << c.threads;
  out << YAML::Key << "device" << YAML::Value << c.device;
  out << YAML::Key << "precision" << YAML::Value << c.precision;
  if (!c.scheme_files.empty())  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "schemes" << YAML::Value << YAML::Flow << c.scheme_files;
  std::vector<std::pair<std::string, std::string>> task_keys;  // beside the name, before the options
  if (!c.task.format.empty()) task_keys.push_back({"format", c.task.format});
  if (c.task.bos) task_keys.push_back({"bos", "true"});  // only then: other runs' resolved configs stay as they were
  emit_named(out, "task", c.task.name, c.task.options, task_keys);
  const ModelConfig& m = c.model;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap
      << YAML::Key << "d_model" << YAML::Value << m.d_model
      << YAML::Key << "num_layers" << YAML::Value << m.num_layers
      << YAML::Key << "num_heads" << YAML::Value << m.num_heads
      << YAML::Key << "d_ff" << YAML::Value << m.d_ff
      << YAML::Key << "dropout" << YAML::Value << m.dropout
      << YAML::Key << "attention_dropout" << YAML::Value << m.attention_dropout
      << YAML::Key << "activation" << YAML::Value << m.activation
      << YAML::Key << "norm" << YAML::Value << m.norm
      << YAML::Key << "causal" << YAML::Value << m.causal
      << YAML::Key << "segment_embeddings" << YAML::Value << m.segment_embeddings
      << YAML::Key << "embedding_layer_norm" << YAML::Value << m.embedding_layer_norm
      << YAML::Key << "embedding_init_std" << YAML::Value << m.embedding_init_std
      << YAML::Key << "embedding_scale" << YAML::Value << m.embedding_scale
      << YAML::Key << "layer_norm_eps" << YAML::Value << m.layer_norm_eps;
  if (m.logit_scaling != "none")  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "logit_scaling" << YAML::Value << m.logit_scaling << YAML::Key << "ssmax_init"
        << YAML::Value << m.ssmax_init;
  if (m.logit_scaling == "constant" || m.logit_scaling == "per_head")
    out << YAML::Key << "logit_scale" << YAML::Value << m.logit_scale;
  if (m.logit_scaling == "llama4")
    out << YAML::Key << "llama4_floor_scale" << YAML::Value << m.llama4_floor_scale << YAML::Key << "llama4_scale"
        << YAML::Value << m.llama4_scale;
  if (m.logit_scaling_blocks != "all")
    out << YAML::Key << "logit_scaling_blocks" << YAML::Value << m.logit_scaling_blocks;
  if (m.window > 0 || m.chunk > 0)  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "window" << YAML::Value << m.window << YAML::Key << "chunk" << YAML::Value << m.chunk
        << YAML::Key << "global_every" << YAML::Value << m.global_every;
  out << YAML::EndMap;
  emit_named(out, "encoding", c.encoding.name, c.encoding.options);
  emit_named(out, "encoding_mix", c.encoding_mix.encoding.name, c.encoding_mix.encoding.options,
             {{"every", std::to_string(c.encoding_mix.every)}});
  if (!c.encoding_heads.empty()) {  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "encoding_heads" << YAML::Value << YAML::BeginSeq;
    for (const auto& group : c.encoding_heads) {
      out << YAML::BeginMap << YAML::Key << "num_heads" << YAML::Value << group.heads << YAML::Key << "name"
          << YAML::Value << group.encoding.name;
      emit_options(out, group.encoding.options);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap
      << YAML::Key << "steps" << YAML::Value << t.steps
      << YAML::Key << "batch_size" << YAML::Value << t.batch_size
      << YAML::Key << "min_length" << YAML::Value << t.min_length
      << YAML::Key << "max_length" << YAML::Value << t.max_length
      << YAML::Key << "curriculum" << YAML::Value << t.curriculum
      << YAML::Key << "increase_every" << YAML::Value << t.increase_every
      << YAML::Key << "increase_by" << YAML::Value << t.increase_by;
  if (!t.phases.empty()) {  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "phases" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : t.phases)
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "steps" << YAML::Value << p.steps << YAML::Key
          << "min_length" << YAML::Value << p.min_length << YAML::Key << "max_length" << YAML::Value << p.max_length
          << YAML::Key << "curriculum" << YAML::Value << p.curriculum << YAML::Key << "increase_every" << YAML::Value
          << p.increase_every << YAML::Key << "increase_by" << YAML::Value << p.increase_by << YAML::EndMap;
    out << YAML::EndSeq;
  }
  out << YAML::Key << "optimizer" << YAML::Value << t.optimizer
      << YAML::Key << "learning_rate" << YAML::Value << t.learning_rate
      << YAML::Key << "weight_decay" << YAML::Value << t.weight_decay
      << YAML::Key << "beta1" << YAML::Value << t.beta1
      << YAML::Key << "beta2" << YAML::Value << t.beta2
      << YAML::Key << "eps" << YAML::Value << t.eps
      << YAML::Key << "warmup_steps" << YAML::Value << t.warmup_steps
      << YAML::Key << "schedule" << YAML::Value << t.schedule
      << YAML::Key << "min_learning_rate" << YAML::Value << t.min_learning_rate
      << YAML::Key << "grad_clip" << YAML::Value << t.grad_clip
      << YAML::Key << "nonfinite" << YAML::Value << t.nonfinite
      << YAML::Key << "log_every" << YAML::Value << t.log_every
      << YAML::Key << "sync_every" << YAML::Value << t.sync_every
      << YAML::Key << "cuda_graphs" << YAML::Value << t.cuda_graphs
      << YAML::Key << "checkpoint_every" << YAML::Value << t.checkpoint_every
      << YAML::Key << "unused_parameters" << YAML::Value << t.unused_parameters
      << YAML::Key << "unused_parameters_steps" << YAML::Value << t.unused_parameters_steps
      << YAML::EndMap;
  out << YAML::Key << "positions" << YAML::Value << YAML::BeginMap
      << YAML::Key << "sampler" << YAML::Value << c.positions.sampler
      << YAML::Key << "max_length" << YAML::Value << c.positions.max_length
      << YAML::Key << "evaluate_with" << YAML::Value << c.positions.evaluate_with;
  if (c.positions.sampler == "cape")  // only then: other runs' resolved configs stay as they were
    out << YAML::Key << "global_shift" << YAML::Value << c.positions.global_shift
        << YAML::Key << "local_shift" << YAML::Value << c.positions.local_shift
        << YAML::Key << "global_scaling" << YAML::Value << c.positions.global_scaling;
  out << YAML::EndMap;
  out << YAML::Key << "eval" << YAML::Value << YAML::BeginMap
      << YAML::Key << "lengths" << YAML::Value << YAML::Flow << c.eval.lengths
      << YAML::Key << "extrapolation" << YAML::Value << YAML::Flow << c.eval.extrapolation
      << YAML::Key << "samples" << YAML::Value << c.eval.samples
      << YAML::Key << "batch_size" << YAML::Value << c.eval.batch_size
      << YAML::Key << "every" << YAML::Value << c.eval.every
      << YAML::Key << "every_lengths" << YAML::Value << YAML::Flow << c.eval.every_lengths
      << YAML::Key << "every_samples" << YAML::Value << c.eval.every_samples;
  // only when given: other runs' resolved configs stay as they were
  if (!c.eval.depths.empty()) out << YAML::Key << "depths" << YAML::Value << YAML::Flow << c.eval.depths;
  if (!c.eval.p_ignore.empty()) out << YAML::Key << "p_ignore" << YAML::Value << YAML::Flow << c.eval.p_ignore;
  out << YAML::EndMap;
  const AnalysisConfig& a = c.analysis;
  out << YAML::Key << "analysis" << YAML::Value << YAML::BeginMap
      << YAML::Key << "attention_statistics" << YAML::Value << a.attention_statistics
      << YAML::Key << "attention_lengths" << YAML::Value << YAML::Flow << a.attention_lengths
      << YAML::Key << "attention_examples" << YAML::Value << a.attention_examples
      << YAML::Key << "attention_float16" << YAML::Value << a.attention_float16
      << YAML::Key << "probes" << YAML::Value << a.probes
      << YAML::Key << "probe_lengths" << YAML::Value << YAML::Flow << a.probe_lengths
      << YAML::Key << "probe_examples" << YAML::Value << a.probe_examples
      << YAML::Key << "probe_ridge" << YAML::Value << a.probe_ridge << YAML::EndMap;
  out << YAML::Key << "output" << YAML::Value << YAML::BeginMap
      << YAML::Key << "dir" << YAML::Value << c.output.dir
      << YAML::Key << "keep_checkpoints" << YAML::Value << YAML::Flow << c.output.keep_checkpoints << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// Every scalar and sequence of a YAML tree, by dotted key path, as flow-style text.
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& item : node) flatten(item.second, prefix + (prefix.empty() ? "" : ".") + item.first.as<std::string>(), out);
    return;
  }
  int64_t integer = 0;
  double number = 0;
  if (node.IsScalar() && YAML::convert<int64_t>::decode(node, integer)) {
    out[prefix] = std::to_string(integer);
    return;
  }
  if (node.IsScalar() && YAML::convert<double>::decode(node, number)) {  // 0.0030000000000000001 -> 0.003
    out[prefix] = fmt::format("{}", number);
    return;
  }
  YAML::Emitter text;
  text << YAML::Flow << node;
  out[prefix] = text.c_str();
}

}  // namespace

bool is_operational_config_key(const std::string& key) {
  static const std::set<std::string> operational = {"name",       "threads",          "device",
                                                    "output.dir", "train.checkpoint_every", "train.sync_every",
                                                    "train.cuda_graphs"};
  return operational.count(key) > 0;
}

std::vector<std::string> config_differences(const std::string& before_yaml, const std::string& after_yaml) {
  std::map<std::string, std::string> before, after;
  flatten(YAML::Load(before_yaml), "", before);
  flatten(YAML::Load(after_yaml), "", after);
  std::set<std::string> keys;
  for (const auto& [key, value] : before) keys.insert(key);
  for (const auto& [key, value] : after) keys.insert(key);
  std::vector<std::string> differences;
  for (const auto& key : keys) {
    if (is_operational_config_key(key)) continue;
    const auto a = before.find(key), b = after.find(key);
    const std::string va = a == before.end() ? "(absent)" : a->second, vb = b == after.end() ? "(absent)" : b->second;
    if (va != vb) differences.push_back(key + ": " + va + " -> " + vb);
  }
  return differences;
}

}  // namespace pelab
