// `cycle_navigation`: final position on a cycle of 5 after steps -1, 0, +1 (Deletang et al. 2023, regular)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/regular/cycle_navigation.py: symbols 0 = left, 1 = stay, 2 = right; output sum(a - 1) mod 5.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class CycleNavigationTask : public Seq2SeqTask {
 public:
  explicit CycleNavigationTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
};

}  // namespace pelab
