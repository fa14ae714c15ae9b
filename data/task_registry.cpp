#include "data/task_registry.h"

#include "data/duplicate_string.h"
#include "data/reverse_string.h"

namespace pelab {

namespace {

// A task class provides description(), options() and an (options) constructor.
template <typename T>
TaskEntry entry(const std::string& name) {
  return {{name, T::description(), T::options()},
          [](const OptionValues& options) -> std::unique_ptr<Task> { return std::make_unique<T>(options); }};
}

}  // namespace

const std::vector<TaskEntry>& task_registry() {
  static const std::vector<TaskEntry> table = {
      entry<DuplicateStringTask>("duplicate_string"),
      entry<ReverseStringTask>("reverse_string"),
  };
  return table;
}

std::unique_ptr<Task> make_task(const std::string& name, const OptionValues& options) {
  return find_factory(task_registry(), name, "task")(options);
}

}  // namespace pelab
