// The shape shared by pelab's registries (schemes, tasks): an explicit table of entries,
// each a catalog entry (name, description, declared options) and a factory.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/config.h"

namespace pelab {

template <typename Factory>
struct RegistryEntry {
  CatalogEntry info;
  Factory factory;
};

template <typename Factory>
Catalog catalog_of(const std::vector<RegistryEntry<Factory>>& table) {
  Catalog catalog;
  for (const auto& e : table) catalog.push_back(e.info);
  return catalog;
}

// The entry registered as `name`; otherwise std::invalid_argument listing the known names.
template <typename Factory>
const RegistryEntry<Factory>& find_entry(const std::vector<RegistryEntry<Factory>>& table, const std::string& name,
                                         const std::string& what) {
  std::vector<std::string> known;
  for (const auto& e : table) {
    if (e.info.name == name) return e;
    known.push_back(e.info.name);
  }
  throw std::invalid_argument("unknown " + what + " '" + name + "'; known: " + join(known));
}
// Its factory.
template <typename Factory>
const Factory& find_factory(const std::vector<RegistryEntry<Factory>>& table, const std::string& name,
                            const std::string& what) {
  return find_entry(table, name, what).factory;
}

}  // namespace pelab
