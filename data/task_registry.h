// The task registry: an explicit name -> factory table in task_registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/registry_table.h"
#include "data/task.h"

namespace pelab {

// (options, format) -> task; an empty format is the task's default (its first format).
using TaskFactory = std::function<std::unique_ptr<Task>(const OptionValues&, const std::string&)>;
using TaskEntry = RegistryEntry<TaskFactory>;

const std::vector<TaskEntry>& task_registry();
inline Catalog task_catalog() { return catalog_of(task_registry()); }
// An unknown name or format throws std::invalid_argument listing the known ones.
// `bos`: task.bos (Task::set_bos)
std::unique_ptr<Task> make_task(const std::string& name, const OptionValues& options, const std::string& format = "",
                                bool bos = false);

}  // namespace pelab
