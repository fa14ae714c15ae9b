#include "core/config/catalog_yaml.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

namespace pelab {

namespace {

const char* kind_key(OptionKind kind) {
  switch (kind) {
    case OptionKind::Bool: return "bool";
    case OptionKind::Int: return "int";
    case OptionKind::Float: return "float";
    case OptionKind::Choice: return "choice";
    default: return "text";
  }
}

OptionKind kind_of(const std::string& key) {
  if (key == "bool") return OptionKind::Bool;
  if (key == "int") return OptionKind::Int;
  if (key == "float") return OptionKind::Float;
  if (key == "choice") return OptionKind::Choice;
  if (key == "text") return OptionKind::Text;
  throw std::runtime_error("unknown option kind '" + key + "'");
}

void emit_catalog(YAML::Emitter& out, const Catalog& catalog) {
  out << YAML::BeginSeq;
  for (const auto& entry : catalog) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << entry.name << YAML::Key << "description"
        << YAML::Value << entry.description << YAML::Key << "causal_only" << YAML::Value << entry.causal_only
        << YAML::Key << "formats" << YAML::Value << YAML::Flow << entry.formats << YAML::Key << "options"
        << YAML::Value << YAML::BeginSeq;
    for (const auto& o : entry.options) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << o.name << YAML::Key << "kind" << YAML::Value
          << kind_key(o.kind) << YAML::Key << "default" << YAML::Value;
      std::visit([&](const auto& v) { out << v; }, o.default_value);
      out << YAML::Key << "help" << YAML::Value << o.help;
      if (!o.choices.empty()) out << YAML::Key << "choices" << YAML::Value << YAML::Flow << o.choices;
      if (o.min) out << YAML::Key << "min" << YAML::Value << YAML::Precision(17) << *o.min;
      if (o.max) out << YAML::Key << "max" << YAML::Value << YAML::Precision(17) << *o.max;
      if (o.required) out << YAML::Key << "required" << YAML::Value << true;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

Catalog read_catalog(const YAML::Node& node) {
  Catalog catalog;
  for (const auto& e : node) {
    CatalogEntry entry;
    entry.name = e["name"].as<std::string>();
    entry.description = e["description"].as<std::string>();
    entry.causal_only = e["causal_only"].as<bool>();
    entry.formats = e["formats"].as<std::vector<std::string>>();
    for (const auto& o : e["options"]) {
      OptionSpec spec;
      spec.name = o["name"].as<std::string>();
      spec.kind = kind_of(o["kind"].as<std::string>());
      spec.help = o["help"].as<std::string>();
      switch (spec.kind) {
        case OptionKind::Bool: spec.default_value = o["default"].as<bool>(); break;
        case OptionKind::Int: spec.default_value = o["default"].as<int64_t>(); break;
        case OptionKind::Float: spec.default_value = o["default"].as<double>(); break;
        default: spec.default_value = o["default"].as<std::string>(); break;
      }
      if (o["choices"]) spec.choices = o["choices"].as<std::vector<std::string>>();
      if (o["min"]) spec.min = o["min"].as<double>();
      if (o["max"]) spec.max = o["max"].as<double>();
      if (o["required"]) spec.required = o["required"].as<bool>();
      entry.options.push_back(spec);
    }
    catalog.push_back(entry);
  }
  return catalog;
}

}  // namespace

std::string catalogs_to_yaml(const Catalogs& catalogs) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "schemes" << YAML::Value;
  emit_catalog(out, catalogs.schemes);
  out << YAML::Key << "tasks" << YAML::Value;
  emit_catalog(out, catalogs.tasks);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Catalogs catalogs_from_yaml(const std::string& text) {
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || !root["schemes"].IsSequence() || !root["tasks"].IsSequence())
      throw std::runtime_error("not a pelab catalog (pelab list --yaml): expected the sequences schemes and tasks");
    return {read_catalog(root["schemes"]), read_catalog(root["tasks"])};
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string("not a pelab catalog (pelab list --yaml): ") + e.what());
  }
}

}  // namespace pelab
