// Learning-rate schedule: linear warm-up, then constant or cosine decay. Torch-free.
#pragma once

#include <cstdint>
#include <random>

#include "core/config/config.h"

namespace pelab {

// Learning rate used for optimizer step `step` (0-based) of `train.steps`.
double learning_rate_at(const TrainConfig& train, int64_t step);

// Input length of the batch of step `step` (0-based):
//   uniform     uniform in [min_length, max_length] (Ruoss et al.; the default)
//   fixed       max_length
//   increasing  min_length + increase_by per increase_every steps, capped at max_length
//               (DeepMind's RegularIncreasingCurriculum)
// With train.phases, the phase of the step decides, its curriculum counting from its first step.
int64_t curriculum_length(const TrainConfig& train, int64_t step, std::mt19937_64& rng);

// The 0-based phase of step `step` (0 without train.phases), and that phase's first step.
struct PhaseAt {
  int64_t index = 0, first_step = 0;
};
PhaseAt phase_at(const TrainConfig& train, int64_t step);

}  // namespace pelab
