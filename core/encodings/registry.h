// The scheme registry: an explicit name -> factory table in registry.cpp, the only place
// scheme names appear. Adding a scheme is one file plus one line there.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/encodings/position_encoding.h"
#include "core/config/registry_table.h"

namespace pelab {

using SchemeFactory = std::function<PositionEncoding(const EncodingContext&, const OptionValues&)>;
using SchemeEntry = RegistryEntry<SchemeFactory>;

// Every registered scheme: the built-in ones in name order, then those added at run time.
const std::vector<SchemeEntry>& scheme_registry();
// Whether `name` is one of the schemes compiled into pelab.
bool is_built_in_scheme(const std::string& name);
// Adds a scheme at run time (a Python file's, python/scheme_bridge.h). A name of a built-in
// scheme throws std::invalid_argument; an added name is replaced (the same file loaded again).
void add_scheme(SchemeEntry entry);
// Names, descriptions and options, for the config loader and `pelab list`.
inline Catalog scheme_catalog() { return catalog_of(scheme_registry()); }
// Builds a scheme; an unknown name throws std::invalid_argument listing the known names.
// (Configs are checked earlier, by the loader, with file:line:col.)
PositionEncoding make_position_encoding(const std::string& name, const EncodingContext& context,
                                        const OptionValues& options);

}  // namespace pelab
