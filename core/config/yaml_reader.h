// Reads one YAML mapping with validation: every error is reported as
// `file:line:col: message` (1-based) pointing at the offending key or value, or as
// `--set key.path=value: message` when the value came from the command line.
// Keys that are never read are rejected by finish(), listing the allowed keys.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/options.h"

namespace pelab {

// A configuration problem, already formatted with its location.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the YAML came from: a file name and the values overridden on the command line.
struct YamlSource {
  std::string file;
  std::map<std::string, std::string> overrides;  // "model.d_model" -> "--set model.d_model=128"
};

class YamlReader {
 public:
  // `node` must be a mapping (or null, read as empty); `path` is its dotted key path ("" at root).
  YamlReader(YAML::Node node, std::shared_ptr<const YamlSource> source, std::string path,
             YAML::Mark fallback_mark = YAML::Mark());

  bool has(const std::string& key) const;
  YamlReader child(const std::string& key);  // a missing child reads as empty
  int64_t get_int(const std::string& key, int64_t default_value,
                  std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
  double get_float(const std::string& key, double default_value,
                   std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
  bool get_bool(const std::string& key, bool default_value);
  std::string get_string(const std::string& key, const std::string& default_value);
  std::string get_choice(const std::string& key, const std::string& default_value,
                         const std::vector<std::string>& choices);
  // A list of choices, e.g. [none, ntk]; a single choice is accepted as a one-element list.
  std::vector<std::string> get_choice_list(const std::string& key, const std::vector<std::string>& default_value,
                                           const std::vector<std::string>& choices);
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& default_value,
                                    std::optional<double> min = std::nullopt,
                                    std::optional<double> max = std::nullopt);
  // A list of numbers, e.g. [0, 0.25, 0.5]; an empty list (as resolved configs write the
  // default) reads as empty.
  std::vector<double> get_float_list(const std::string& key, const std::vector<double>& default_value,
                                     std::optional<double> min = std::nullopt,
                                     std::optional<double> max = std::nullopt);
  // A list of mappings at `key` (e.g. train.phases), each read as a child "key[i]"; empty
  // when absent.
  std::vector<YamlReader> children(const std::string& key);
  // The raw node at `key` (marks it read); null when absent.
  YAML::Node get_node(const std::string& key) { return value(key); }
  // The keys of this mapping, in file order.
  std::vector<std::string> keys() const;
  // Reads every declared option (absent ones take their default).
  OptionValues get_options(const std::vector<OptionSpec>& specs);
  // Rejects keys that were not read; `what` names the section in the message.
  void finish(const std::string& what);

  // Errors at a key's value (or at the mapping itself when the key is absent).
  [[noreturn]] void fail_at(const std::string& key, const std::string& message) const;
  // Errors at a key itself (its name), e.g. an unknown key.
  [[noreturn]] void fail_at_key(const std::string& key, const std::string& message) const;
  const std::string& path() const { return path_; }

 private:
  std::string key_path(const std::string& key) const;
  std::string location(const std::string& key, bool at_key) const;
  // Errors at element `index` of the list at `key`: "<where>: key[index]: message".
  [[noreturn]] void fail_at_element(const std::string& key, size_t index, const YAML::Node& element,
                                    const std::string& message) const;
  YAML::Node value(const std::string& key);  // marks the key as read
  void check_range(const std::string& key, double v, std::optional<double> min,
                   std::optional<double> max) const;

  YAML::Node node_;
  std::shared_ptr<const YamlSource> source_;
  std::string path_;
  YAML::Mark fallback_mark_;
  std::set<std::string> read_;
};

// Applies `key.path=value` (value parsed as YAML) to `root`, recording it in `source`.
// Errors about it name it as `<via> key.path=value` (the command line's --set, or a sweep's).
void apply_override(YAML::Node& root, const std::string& assignment, YamlSource& source,
                    const std::string& via = "--set");

// The text of a config file; ConfigError `path: cannot open <what>` otherwise.
std::string read_config_file(const std::string& path, const std::string& what);
// Parses YAML text; a syntax error is a ConfigError `source_name:line:col: invalid YAML: ...`.
YAML::Node parse_yaml(const std::string& text, const std::string& source_name);

}  // namespace pelab
