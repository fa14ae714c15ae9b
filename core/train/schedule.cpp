#include "core/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace pelab {

double learning_rate_at(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_steps)
    return t.learning_rate * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps);
  if (t.schedule == "constant") return t.learning_rate;
  const int64_t decay_steps = std::max<int64_t>(1, t.steps - t.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - t.warmup_steps) / decay_steps);
  return t.min_learning_rate +
         (t.learning_rate - t.min_learning_rate) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace pelab
