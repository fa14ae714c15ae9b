#include "data/task_registry.h"

#include "data/duplicate_string.h"
#include "data/reverse_string.h"
#include "data/tasks/binary_addition.h"
#include "data/tasks/binary_multiplication.h"
#include "data/tasks/bucket_sort.h"
#include "data/tasks/compute_sqrt.h"
#include "data/tasks/cycle_navigation.h"
#include "data/tasks/even_pairs.h"
#include "data/tasks/missing_duplicate_string.h"
#include "data/tasks/modular_arithmetic.h"
#include "data/tasks/modular_arithmetic_brackets.h"
#include "data/tasks/odds_first.h"
#include "data/tasks/parity_check.h"
#include "data/tasks/solve_equation.h"
#include "data/tasks/stack_manipulation.h"

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
      entry<BinaryAdditionTask>("binary_addition"),
      entry<BinaryMultiplicationTask>("binary_multiplication"),
      entry<BucketSortTask>("bucket_sort"),
      entry<ComputeSqrtTask>("compute_sqrt"),
      entry<CycleNavigationTask>("cycle_navigation"),
      entry<DuplicateStringTask>("duplicate_string"),
      entry<EvenPairsTask>("even_pairs"),
      entry<MissingDuplicateStringTask>("missing_duplicate_string"),
      entry<ModularArithmeticTask>("modular_arithmetic"),
      entry<ModularArithmeticBracketsTask>("modular_arithmetic_brackets"),
      entry<OddsFirstTask>("odds_first"),
      entry<ParityCheckTask>("parity_check"),
      entry<ReverseStringTask>("reverse_string"),
      entry<SolveEquationTask>("solve_equation"),
      entry<StackManipulationTask>("stack_manipulation"),
  };
  return table;
}

std::unique_ptr<Task> make_task(const std::string& name, const OptionValues& options) {
  return find_factory(task_registry(), name, "task")(options);
}

}  // namespace pelab
