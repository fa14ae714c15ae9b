#include "data/tasks/stack_manipulation.h"

namespace pelab {

StackManipulationTask::StackManipulationTask(const OptionValues& options)
    : Seq2SeqTask(5, 3) {}

std::string StackManipulationTask::description() { return "the stack after POP / PUSH 0 / PUSH 1 actions, top first"; }

std::vector<OptionSpec> StackManipulationTask::options() { return {}; }

Example StackManipulationTask::generate(int64_t length, Rng& rng) const {
  Example e;
  std::uniform_int_distribution<int64_t> bit(0, 1), action(2, 4);
  std::vector<int64_t> stack;
  if (length == 1) {
    e.input = {bit(rng)};
    stack = e.input;
  } else {
    std::uniform_int_distribution<int64_t> initial(1, length - 1);
    const int64_t size = initial(rng);
    for (int64_t i = 0; i < size; ++i) e.input.push_back(bit(rng));
    stack = e.input;
    for (int64_t i = size; i < length; ++i) {
      const int64_t a = action(rng);
      e.input.push_back(a);
      if (a == 2) {
        if (!stack.empty()) stack.pop_back();
      } else {
        stack.push_back(a - 3);
      }
    }
  }
  e.output.assign(stack.rbegin(), stack.rend());
  e.output.push_back(2);
  e.scored.assign(e.output.size(), true);
  e.output.resize(length + 1, 0);
  e.scored.resize(length + 1, false);
  return e;
}

}  // namespace pelab
