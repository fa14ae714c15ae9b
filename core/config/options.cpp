#include "core/config/options.h"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace pelab {

OptionSpec OptionSpec::boolean(std::string name, bool default_value, std::string help) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionKind::Bool;
  s.default_value = default_value;
  s.help = std::move(help);
  return s;
}

OptionSpec OptionSpec::integer(std::string name, int64_t default_value, std::string help,
                               std::optional<double> min, std::optional<double> max) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionKind::Int;
  s.default_value = default_value;
  s.help = std::move(help);
  s.min = min;
  s.max = max;
  return s;
}

OptionSpec OptionSpec::real(std::string name, double default_value, std::string help,
                            std::optional<double> min, std::optional<double> max) {
  OptionSpec s = integer(std::move(name), 0, std::move(help), min, max);
  s.kind = OptionKind::Float;
  s.default_value = default_value;
  return s;
}

OptionSpec OptionSpec::choice(std::string name, std::string default_value,
                              std::vector<std::string> choices, std::string help) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionKind::Choice;
  s.default_value = std::move(default_value);
  s.choices = std::move(choices);
  s.help = std::move(help);
  return s;
}

OptionSpec OptionSpec::text(std::string name, std::string default_value, std::string help, bool required) {
  OptionSpec s = choice(std::move(name), std::move(default_value), {}, std::move(help));
  s.kind = OptionKind::Text;
  s.required = required;
  return s;
}

std::string OptionSpec::kind_name() const {
  switch (kind) {
    case OptionKind::Bool: return "bool";
    case OptionKind::Int: return "int";
    case OptionKind::Float: return "float";
    case OptionKind::Choice: return "one of " + join(choices, "|");
    case OptionKind::Text: return "string";
  }
  return "?";
}

static std::string format_bound(double v) { return fmt::format("{}", v); }

std::string OptionSpec::describe_range() const {
  if (!min && !max) return "";
  return "in [" + (min ? format_bound(*min) : std::string("-inf")) + ", " +
         (max ? format_bound(*max) : std::string("inf")) + "]";
}

std::string format_option_value(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_bound(d); }
    std::string operator()(const std::string& s) const { return s; }
  };
  return std::visit(Visitor{}, value);
}

OptionValues OptionValues::defaults(const std::vector<OptionSpec>& specs) {
  OptionValues values;
  for (const auto& spec : specs) values.set(spec.name, spec.default_value);
  return values;
}

const OptionValue& OptionValues::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("option '" + name + "' was not declared");
  return it->second;
}

template <typename T>
static const T& typed(const OptionValue& v, const std::string& name, const char* type) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw std::logic_error("option '" + name + "' is not of type " + type);
}

bool OptionValues::get_bool(const std::string& name) const { return typed<bool>(at(name), name, "bool"); }
int64_t OptionValues::get_int(const std::string& name) const { return typed<int64_t>(at(name), name, "int"); }
double OptionValues::get_float(const std::string& name) const { return typed<double>(at(name), name, "float"); }
const std::string& OptionValues::get_string(const std::string& name) const {
  return typed<std::string>(at(name), name, "string");
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out;
}

}  // namespace pelab
