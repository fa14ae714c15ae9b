// `stack_manipulation`: the stack after POP / PUSH 0 / PUSH 1 actions, top first (Deletang et al. 2023, deterministic context-free)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/dcf/stack_manipulation.py: ids 0, 1 stack bits, 2 POP, 3 PUSH 0, 4 PUSH 1.
// An initial stack of U[1, L-1] bits (bottom to top) then actions; POP on empty is ignored.
// Output: the final stack top to bottom, the terminator 2, zero padding to L + 1 tokens;
// scored up to and including the terminator.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class StackManipulationTask : public Seq2SeqTask {
 public:
  explicit StackManipulationTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length + 1; }
};

}  // namespace pelab
