#include "data/task_registry.h"

#include <algorithm>

#include "data/duplicate_string.h"
#include "data/reverse_string.h"
#include "data/text.h"
#include "data/tasks/addition.h"
#include "data/tasks/binary_addition.h"
#include "data/tasks/binary_multiplication.h"
#include "data/tasks/bucket_sort.h"
#include "data/tasks/compute_sqrt.h"
#include "data/tasks/cycle_navigation.h"
#include "data/tasks/even_pairs.h"
#include "data/tasks/flip_flop.h"
#include "data/tasks/multiplication.h"
#include "data/tasks/ngram_lookup.h"
#include "data/tasks/number_sort.h"
#include "data/tasks/passkey.h"
#include "data/tasks/induction_heads.h"
#include "data/tasks/missing_duplicate_string.h"
#include "data/tasks/modular_arithmetic.h"
#include "data/tasks/modular_arithmetic_brackets.h"
#include "data/tasks/mqar.h"
#include "data/tasks/odds_first.h"
#include "data/tasks/parity_check.h"
#include "data/tasks/selective_copying.h"
#include "data/tasks/solve_equation.h"
#include "data/tasks/stack_manipulation.h"
#include "data/tasks/state_tracking.h"
#include "data/tasks/symbol_strings.h"
#include "data/tasks/token_ids.h"

namespace pelab {

namespace {

// A task class provides description(), options(), formats() (the default first) and an
// (options) constructor.
template <typename T>
TaskEntry entry(const std::string& name) {
  CatalogEntry info{name, T::description(), T::options(), false, T::formats()};
  return {info, [formats = info.formats](const OptionValues& options, const std::string& format) -> std::unique_ptr<Task> {
            const std::string chosen = format.empty() ? formats.front() : format;
            if (std::find(formats.begin(), formats.end(), chosen) == formats.end())
              throw std::invalid_argument("task format '" + chosen + "' is not one of " + join(formats));
            auto task = std::make_unique<T>(options);
            task->set_format(parse_format(chosen));
            return task;
          }};
}

}  // namespace

const std::vector<TaskEntry>& task_registry() {
  static const std::vector<TaskEntry> table = {
      entry<AdditionTask>("addition"),
      entry<BinaryAdditionTask>("binary_addition"),
      entry<BinaryMultiplicationTask>("binary_multiplication"),
      entry<BucketSortTask>("bucket_sort"),
      entry<ComputeSqrtTask>("compute_sqrt"),
      entry<CopyTask>("copy"),
      entry<CycleNavigationTask>("cycle_navigation"),
      entry<DuplicateStringTask>("duplicate_string"),
      entry<EvenPairsTask>("even_pairs"),
      entry<FlipFlopTask>("flip_flop"),
      entry<InductionHeadsTask>("induction_heads"),
      entry<MissingDuplicateStringTask>("missing_duplicate_string"),
      entry<ModularArithmeticTask>("modular_arithmetic"),
      entry<ModularArithmeticBracketsTask>("modular_arithmetic_brackets"),
      entry<MqarTask>("mqar"),
      entry<MultiplicationTask>("multiplication"),
      entry<NgramLookupTask>("ngram_lookup"),
      entry<NumberSortTask>("number_sort"),
      entry<OddsFirstTask>("odds_first"),
      entry<ParityCheckTask>("parity_check"),
      entry<PasskeyTask>("passkey"),
      entry<ReverseTask>("reverse"),
      entry<ReverseStringTask>("reverse_string"),
      entry<SelectiveCopyingTask>("selective_copying"),
      entry<SolveEquationTask>("solve_equation"),
      entry<SortTask>("sort"),
      entry<StackManipulationTask>("stack_manipulation"),
      entry<StateTrackingTask>("state_tracking"),
      entry<TextTask>("text"),
      entry<TokenIdsTask>("token_ids"),
  };
  return table;
}

std::unique_ptr<Task> make_task(const std::string& name, const OptionValues& options, const std::string& format,
                                bool bos) {
  auto task = find_factory(task_registry(), name, "task")(options, format);
  task->set_bos(bos);
  return task;
}

}  // namespace pelab
