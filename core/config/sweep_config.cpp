#include "core/config/sweep_config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <set>

#include "core/config/yaml_reader.h"

namespace pelab {

namespace {

std::string flow_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

std::vector<SweepAxis> read_axes(YamlReader reader, const std::string& what) {
  std::vector<SweepAxis> axes;
  for (const auto& key : reader.keys()) {
    YAML::Node values = reader.get_node(key);
    if (!values.IsSequence() || values.size() == 0)
      reader.fail_at(key, what + " axis '" + key + "' needs a non-empty list of values, e.g. [a, b]");
    SweepAxis axis{key, {}};
    for (const auto& v : values) axis.values.push_back(flow_text(v));
    axes.push_back(axis);
  }
  return axes;
}

}  // namespace

std::string axis_label(const std::string& key) {
  const auto dot = key.rfind('.');
  if (dot == std::string::npos) return key;
  const std::string last = key.substr(dot + 1);
  if (last != "name") return last;
  const std::string parent = key.substr(0, dot);
  const auto parent_dot = parent.rfind('.');
  return parent_dot == std::string::npos ? parent : parent.substr(parent_dot + 1);
}

namespace {

std::string sanitized(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') out += c;
    else if (c == ',' && !out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

}  // namespace

std::string run_id(const std::vector<std::pair<std::string, std::string>>& axis_values) {
  if (axis_values.empty()) return "run";
  std::string id;
  for (const auto& [key, value] : axis_values) {
    if (!id.empty()) id += "_";
    id += axis_label(key) + "-" + sanitized(value);
  }
  return id;
}

SweepConfig load_sweep_config(const std::string& path) {
  const YAML::Node root = parse_yaml(read_config_file(path, "sweep file"), path);
  auto source = std::make_shared<YamlSource>();
  source->file = path;
  YamlReader r(root, source, "");
  SweepConfig s;
  s.file = path;
  s.name = r.get_string("name", std::filesystem::path(path).stem().string());
  const std::string base = r.get_string("base", "");
  if (base.empty()) r.fail_at("base", "a sweep needs `base: RUN_CONFIG.yaml` (relative to the sweep file)");
  const auto folder = std::filesystem::path(path).parent_path();
  s.base = std::filesystem::path(base).is_absolute() ? base : (folder / base).lexically_normal().string();
  if (!std::filesystem::exists(s.base)) r.fail_at("base", "base config '" + s.base + "' does not exist");
  YamlReader fixed = r.child("set");
  for (const auto& key : fixed.keys()) s.fixed.emplace_back(key, flow_text(fixed.get_node(key)));
  s.grid = read_axes(r.child("grid"), "grid");
  s.zip = read_axes(r.child("zip"), "zip");
  if (!s.zip.empty())
    for (const auto& axis : s.zip)
      if (axis.values.size() != s.zip.front().values.size())
        r.child("zip").fail_at(axis.key, "zip axes advance together and need lists of one length: '" + axis.key +
                                             "' has " + std::to_string(axis.values.size()) + " values, '" +
                                             s.zip.front().key + "' " + std::to_string(s.zip.front().values.size()));
  std::set<std::string> seen;
  for (const auto* axes : {&s.grid, &s.zip})
    for (const auto& axis : *axes) {
      if (axis.key == "output.dir" || axis.key == "name")
        r.fail_at(axis.key.substr(0, axis.key.find('.')), "'" + axis.key + "' is set by the sweep for each run");
      if (!seen.insert(axis.key).second) r.fail_at("zip", "axis '" + axis.key + "' appears twice");
    }
  s.output = r.get_string("output", "runs/sweeps/" + s.name);
  YamlReader slurm = r.child("slurm");
  s.slurm.partition = slurm.get_string("partition", s.slurm.partition);
  s.slurm.time = slurm.get_string("time", s.slurm.time);
  s.slurm.cpus_per_task = slurm.get_int("cpus_per_task", s.slurm.cpus_per_task, 1, 4096);
  s.slurm.gpus = slurm.get_int("gpus", s.slurm.gpus, 0, 64);
  s.slurm.mem = slurm.get_string("mem", s.slurm.mem);
  s.slurm.runs_per_task = slurm.get_int("runs_per_task", s.slurm.runs_per_task, 1, 4096);
  slurm.finish("slurm");
  r.finish("the sweep file");
  return s;
}

std::vector<SweepRun> expand_sweep(const SweepConfig& sweep, const Catalog& schemes, const Catalog& tasks,
                                   bool validate) {
  // grid combinations (odometer, last axis fastest) x zip positions
  std::vector<std::vector<std::pair<std::string, std::string>>> combinations = {{}};
  for (const auto& axis : sweep.grid) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& partial : combinations)
      for (const auto& value : axis.values) {
        auto extended = partial;
        extended.emplace_back(axis.key, value);
        next.push_back(extended);
      }
    combinations = next;
  }
  if (!sweep.zip.empty()) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& partial : combinations)
      for (size_t i = 0; i < sweep.zip.front().values.size(); ++i) {
        auto extended = partial;
        for (const auto& axis : sweep.zip) extended.emplace_back(axis.key, axis.values[i]);
        next.push_back(extended);
      }
    combinations = next;
  }
  std::vector<SweepRun> runs;
  std::set<std::string> ids;
  for (const auto& combination : combinations) {
    SweepRun run;
    run.index = static_cast<int64_t>(runs.size());
    run.id = run_id(combination);
    if (!ids.insert(run.id).second) run.id += "_" + std::to_string(run.index);  // values that sanitize alike
    for (const auto& [key, value] : sweep.fixed) run.all_overrides.push_back(key + "=" + value);
    for (const auto& [key, value] : combination) {
      run.overrides.push_back(key + "=" + value);
      run.all_overrides.push_back(key + "=" + value);
    }
    run.dir = (std::filesystem::path(sweep.output) / "runs" / run.id).string();
    if (validate) {
      std::vector<std::string> overrides = run.all_overrides;
      overrides.push_back("name=" + run.id);
      overrides.push_back("output.dir=" + run.dir);
      try {
        load_run_config(sweep.base, overrides, schemes, tasks, "sweep value");
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) + " (sweep " + sweep.file + ", run " + run.id + ")");
      }
    }
    runs.push_back(run);
  }
  return runs;
}

}  // namespace pelab
