// The registries' catalogs (schemes and tasks: names, descriptions, declared options) as
// YAML, and back. `pelab list --yaml` prints them for tools; the config fuzzer
// (tests/fuzz) loads them so that it can validate configs without LibTorch. Torch-free.
#pragma once

#include <string>

#include "core/config/config.h"

namespace pelab {

struct Catalogs {
  Catalog schemes, tasks;
};

std::string catalogs_to_yaml(const Catalogs& catalogs);
// Throws std::runtime_error on text that catalogs_to_yaml did not write.
Catalogs catalogs_from_yaml(const std::string& text);

}  // namespace pelab
