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

int64_t curriculum_length(const TrainConfig& t, int64_t step, std::mt19937_64& rng) {
  if (t.curriculum == "fixed") return t.max_length;
  if (t.curriculum == "increasing")
    return std::min(t.max_length, t.min_length + (step / t.increase_every) * t.increase_by);
  std::uniform_int_distribution<int64_t> length(t.min_length, t.max_length);
  return length(rng);
}

}  // namespace pelab
