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

PhaseAt phase_at(const TrainConfig& t, int64_t step) {
  PhaseAt at;
  for (size_t i = 0; i + 1 < t.phases.size() && step >= at.first_step + t.phases[i].steps; ++i) {
    at.first_step += t.phases[i].steps;
    at.index = static_cast<int64_t>(i) + 1;
  }
  return at;
}

int64_t curriculum_length(const TrainConfig& t, int64_t step, std::mt19937_64& rng) {
  TrainPhase phase{t.steps, t.min_length, t.max_length, t.curriculum, t.increase_every, t.increase_by};
  const PhaseAt at = phase_at(t, step);
  if (!t.phases.empty()) phase = t.phases[at.index];
  const int64_t in_phase = step - at.first_step;
  if (phase.curriculum == "fixed") return phase.max_length;
  if (phase.curriculum == "increasing")
    return std::min(phase.max_length, phase.min_length + (in_phase / phase.increase_every) * phase.increase_by);
  std::uniform_int_distribution<int64_t> length(phase.min_length, phase.max_length);
  return length(rng);
}

}  // namespace pelab
