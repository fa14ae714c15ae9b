// Typed, self-describing options of a scheme or task. A scheme declares its options once
// (name, type, default, allowed values or range, help); the config loader validates YAML
// against the declaration, `pelab list` prints it, and the scheme reads typed values.
// Torch-free on purpose: config parsing and listing do not need LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pelab {

using OptionValue = std::variant<bool, int64_t, double, std::string>;

enum class OptionKind { Bool, Int, Float, Choice, Text };

struct OptionSpec {
  std::string name;
  OptionKind kind = OptionKind::Int;
  OptionValue default_value;
  std::string help;
  std::vector<std::string> choices;  // Choice only
  std::optional<double> min, max;    // Int and Float: inclusive bounds

  static OptionSpec boolean(std::string name, bool default_value, std::string help);
  static OptionSpec integer(std::string name, int64_t default_value, std::string help,
                            std::optional<double> min = std::nullopt,
                            std::optional<double> max = std::nullopt);
  static OptionSpec real(std::string name, double default_value, std::string help,
                         std::optional<double> min = std::nullopt,
                         std::optional<double> max = std::nullopt);
  static OptionSpec choice(std::string name, std::string default_value,
                           std::vector<std::string> choices, std::string help);
  // Free text, e.g. a file path; `required` rejects an empty value.
  static OptionSpec text(std::string name, std::string default_value, std::string help, bool required = false);
  bool required = false;             // Text only

  std::string kind_name() const;         // "int", "float", "bool", "string", "one of a|b"
  std::string describe_range() const;    // "in [1, 4096]" or "" when unbounded
};

std::string format_option_value(const OptionValue& value);

// Validated option values of one scheme or task; every declared option is present.
class OptionValues {
 public:
  OptionValues() = default;
  // All defaults of `specs`.
  static OptionValues defaults(const std::vector<OptionSpec>& specs);

  void set(const std::string& name, OptionValue value) { values_[name] = std::move(value); }
  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::map<std::string, OptionValue>& all() const { return values_; }

 private:
  const OptionValue& at(const std::string& name) const;
  std::map<std::string, OptionValue> values_;
};

// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace pelab
