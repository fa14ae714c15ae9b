// The task registry: an explicit name -> factory table in task_registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/registry_table.h"
#include "data/task.h"

namespace pelab {

using TaskFactory = std::function<std::unique_ptr<Task>(const OptionValues&)>;
using TaskEntry = RegistryEntry<TaskFactory>;

const std::vector<TaskEntry>& task_registry();
inline Catalog task_catalog() { return catalog_of(task_registry()); }
// An unknown name throws std::invalid_argument listing the known names.
std::unique_ptr<Task> make_task(const std::string& name, const OptionValues& options);

}  // namespace pelab
