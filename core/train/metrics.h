// Loss and accuracy on the scored positions of a batch.
#pragma once

#include <torch/torch.h>

#include "data/task.h"

namespace pelab {

struct BatchScore {
  torch::Tensor loss;             // scalar: mean cross-entropy over scored positions
  int64_t correct_tokens = 0;     // argmax == target at scored positions
  int64_t scored_tokens = 0;
  int64_t correct_sequences = 0;  // rows whose every scored position is correct
  int64_t sequences = 0;
};

// logits: (B, T, C) -> loss and counts on batch.scored
BatchScore score_batch(const torch::Tensor& logits, const Batch& batch);

}  // namespace pelab
