// Learning-rate schedule: linear warm-up, then constant or cosine decay. Torch-free.
#pragma once

#include <cstdint>

#include "core/io/config.h"

namespace pelab {

// Learning rate used for optimizer step `step` (0-based) of `train.steps`.
double learning_rate_at(const TrainConfig& train, int64_t step);

}  // namespace pelab
