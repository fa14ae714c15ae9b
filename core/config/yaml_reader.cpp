#include "core/config/yaml_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace pelab {

namespace {

std::string format_mark(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file + ":1:1";
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string describe_node(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

YamlReader::YamlReader(YAML::Node node, std::shared_ptr<const YamlSource> source, std::string path,
                       YAML::Mark fallback_mark)
    : node_(node), source_(std::move(source)), path_(std::move(path)), fallback_mark_(fallback_mark) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    std::string where = path_.empty() ? "the config" : "'" + path_ + "'";
    throw ConfigError(format_mark(source_->file, node_.Mark()) + ": " + where +
                      " must be a mapping of key: value, got " + describe_node(node_));
  }
}

std::string YamlReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

std::string YamlReader::location(const std::string& key, bool at_key) const {
  // A value set (or created) by --set: name the override, at this path or below it.
  const std::string path = key_path(key);
  for (const auto& [overridden, origin] : source_->overrides)
    if (overridden == path || overridden.rfind(path + ".", 0) == 0) return origin;
  if (node_ && node_.IsMap()) {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.Scalar() == key) {
        const YAML::Mark mark = at_key ? it->first.Mark() : it->second.Mark();
        return format_mark(source_->file, mark.is_null() ? it->first.Mark() : mark);
      }
    }
  }
  // The key is absent: point at the mapping that should hold it.
  return format_mark(source_->file, node_ && node_.IsMap() ? node_.Mark() : fallback_mark_);
}

void YamlReader::fail_at(const std::string& key, const std::string& message) const {
  throw ConfigError(location(key, false) + ": " + key_path(key) + ": " + message);
}

void YamlReader::fail_at_key(const std::string& key, const std::string& message) const {
  throw ConfigError(location(key, true) + ": " + message);
}

bool YamlReader::has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

YAML::Node YamlReader::value(const std::string& key) {
  read_.insert(key);
  if (!node_ || !node_.IsMap()) return YAML::Node();
  return node_[key];
}

YamlReader YamlReader::child(const std::string& key) {
  YAML::Node v = value(key);
  YAML::Mark mark = node_ && node_.IsMap() ? node_.Mark() : fallback_mark_;
  if (v && !v.IsNull() && !v.IsMap()) fail_at(key, "must be a mapping of key: value, got " + describe_node(v));
  return YamlReader(v, source_, key_path(key), mark);
}

std::vector<YamlReader> YamlReader::children(const std::string& key) {
  YAML::Node v = value(key);
  std::vector<YamlReader> out;
  if (!v || v.IsNull()) return out;
  if (!v.IsSequence()) fail_at(key, "expected a list of mappings, got " + describe_node(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsMap())
      throw ConfigError(format_mark(source_->file, v[i].Mark()) + ": " + key_path(key) + "[" + std::to_string(i) +
                        "]: must be a mapping of key: value, got " + describe_node(v[i]));
    out.emplace_back(v[i], source_, key_path(key) + "[" + std::to_string(i) + "]", v[i].Mark());
  }
  return out;
}

void YamlReader::check_range(const std::string& key, double v, std::optional<double> min,
                             std::optional<double> max) const {
  if ((min && v < *min) || (max && v > *max)) {
    fail_at(key, number_text(v) + " is out of range: must be in [" +
                     (min ? number_text(*min) : std::string("-inf")) + ", " +
                     (max ? number_text(*max) : std::string("inf")) + "]");
  }
}

int64_t YamlReader::get_int(const std::string& key, int64_t default_value, std::optional<double> min,
                            std::optional<double> max) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  int64_t out = 0;
  if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, out))
    fail_at(key, "expected an integer, got " + describe_node(v));
  check_range(key, static_cast<double>(out), min, max);
  return out;
}

double YamlReader::get_float(const std::string& key, double default_value, std::optional<double> min,
                             std::optional<double> max) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  double out = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, out) || !std::isfinite(out))
    fail_at(key, "expected a finite number, got " + describe_node(v));
  check_range(key, out, min, max);
  return out;
}

bool YamlReader::get_bool(const std::string& key, bool default_value) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  bool out = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out))
    fail_at(key, "expected true or false, got " + describe_node(v));
  return out;
}

std::string YamlReader::get_string(const std::string& key, const std::string& default_value) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  if (!v.IsScalar()) fail_at(key, "expected a string, got " + describe_node(v));
  // a control character (a carriage return from a Windows editor, say) would not survive
  // the resolved config's round trip, nor a file name
  for (unsigned char c : v.Scalar())
    if (c < 0x20 || c == 0x7f) fail_at(key, fmt::format("contains the control character 0x{:02x}", c));
  return v.Scalar();
}

std::string YamlReader::get_choice(const std::string& key, const std::string& default_value,
                                   const std::vector<std::string>& choices) {
  std::string out = get_string(key, default_value);
  for (const auto& c : choices)
    if (c == out) return out;
  fail_at(key, "'" + out + "' is not allowed; expected one of: " + join(choices));
}

void YamlReader::fail_at_element(const std::string& key, size_t index, const YAML::Node& element,
                                 const std::string& message) const {
  auto ov = source_->overrides.find(key_path(key));
  const std::string where = ov != source_->overrides.end() ? ov->second : format_mark(source_->file, element.Mark());
  throw ConfigError(where + ": " + key_path(key) + "[" + std::to_string(index) + "]: " + message);
}

std::vector<int64_t> YamlReader::get_int_list(const std::string& key,
                                              const std::vector<int64_t>& default_value,
                                              std::optional<double> min, std::optional<double> max) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  if (!v.IsSequence()) fail_at(key, "expected a list of integers such as [8, 16, 32], got " + describe_node(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x = 0;
    if (!v[i].IsScalar() || !YAML::convert<int64_t>::decode(v[i], x))
      fail_at_element(key, i, v[i], "expected an integer, got " + describe_node(v[i]));
    check_range(key, static_cast<double>(x), min, max);
    out.push_back(x);
  }
  if (out.empty()) fail_at(key, "must not be empty");
  return out;
}

std::vector<double> YamlReader::get_float_list(const std::string& key, const std::vector<double>& default_value,
                                              std::optional<double> min, std::optional<double> max) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  if (!v.IsSequence()) fail_at(key, "expected a list of numbers such as [0, 0.5, 1], got " + describe_node(v));
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    double x = 0;
    if (!v[i].IsScalar() || !YAML::convert<double>::decode(v[i], x) || !std::isfinite(x))
      fail_at_element(key, i, v[i], "expected a number, got " + describe_node(v[i]));
    check_range(key, x, min, max);
    out.push_back(x);
  }
  return out;
}

std::vector<std::string> YamlReader::get_choice_list(const std::string& key,
                                                     const std::vector<std::string>& default_value,
                                                     const std::vector<std::string>& choices) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) return default_value;
  if (v.IsScalar()) return {get_choice(key, default_value.front(), choices)};
  if (!v.IsSequence()) fail_at(key, "expected a list such as [" + join(choices) + "], got " + describe_node(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = v[i].IsScalar() ? v[i].Scalar() : "";
    if (std::find(choices.begin(), choices.end(), item) == choices.end())
      fail_at_element(key, i, v[i], describe_node(v[i]) + " is not allowed; expected one of: " + join(choices));
    out.push_back(item);
  }
  if (out.empty()) fail_at(key, "must not be empty");
  return out;
}

OptionValues YamlReader::get_options(const std::vector<OptionSpec>& specs) {
  OptionValues values = OptionValues::defaults(specs);
  for (const auto& spec : specs) {
    switch (spec.kind) {
      case OptionKind::Bool:
        values.set(spec.name, get_bool(spec.name, std::get<bool>(spec.default_value)));
        break;
      case OptionKind::Int:
        values.set(spec.name, get_int(spec.name, std::get<int64_t>(spec.default_value), spec.min, spec.max));
        break;
      case OptionKind::Float:
        values.set(spec.name, get_float(spec.name, std::get<double>(spec.default_value), spec.min, spec.max));
        break;
      case OptionKind::Choice:
        values.set(spec.name, get_choice(spec.name, std::get<std::string>(spec.default_value), spec.choices));
        break;
      case OptionKind::Text: {
        std::string value = get_string(spec.name, std::get<std::string>(spec.default_value));
        if (spec.required && value.empty()) fail_at(spec.name, "'" + key_path(spec.name) + "' is required: " + spec.help);
        values.set(spec.name, value);
        break;
      }
    }
  }
  return values;
}

std::vector<std::string> YamlReader::keys() const {
  std::vector<std::string> out;
  if (!node_ || !node_.IsMap()) return out;
  for (auto it = node_.begin(); it != node_.end(); ++it) out.push_back(it->first.Scalar());
  return out;
}

namespace {

// Edits (insertions, deletions, substitutions, swaps of neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The allowed key a typo most likely meant (within a third of its length in edits), or "".
std::string nearest(const std::string& key, const std::vector<std::string>& allowed) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, key.size() / 3) + 1;
  for (const auto& candidate : allowed) {
    const size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

void YamlReader::finish(const std::string& what) {
  if (!node_ || !node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (read_.count(key)) continue;
    std::vector<std::string> allowed(read_.begin(), read_.end());
    const std::string meant = nearest(key, allowed);
    fail_at_key(key, "unknown key '" + key_path(key) + "' in " + what +
                         (meant.empty() ? std::string() : " (did you mean '" + meant + "'?)") +
                         "; allowed keys: " + (allowed.empty() ? std::string("none") : join(allowed)));
  }
}

std::string read_config_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open " + what);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node parse_yaml(const std::string& text, const std::string& source_name) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
}

void apply_override(YAML::Node& root, const std::string& assignment, YamlSource& source, const std::string& via) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(via + " " + assignment + ": expected key.path=value, e.g. " + via + " model.d_model=128");
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const std::string origin = via + " " + assignment;
  YAML::Node parsed;
  try {
    parsed = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": value is not valid YAML: " + e.msg);
  }
  std::vector<std::string> keys;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw ConfigError(origin + ": empty key in path '" + path + "'");
    keys.push_back(part);
  }
  // yaml-cpp nodes are handles: walking with copies keeps edits in the original tree.
  YAML::Node node = root;
  std::string walked;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + keys[i];
    YAML::Node next = node[keys[i]];
    if (next && !next.IsNull() && !next.IsMap())
      throw ConfigError(origin + ": '" + walked + "' is not a mapping, cannot set '" + path + "'");
    if (!next || next.IsNull()) {
      node[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = node[keys[i]];
    }
    node.reset(next);
  }
  node[keys.back()] = parsed;
  source.overrides[path] = origin;
}

}  // namespace pelab
