// Loss and accuracy on the scored positions of a batch.
#pragma once

#include <cmath>  // NAN

#include <torch/torch.h>

#include "data/task.h"

namespace pelab {

struct BatchScore {
  torch::Tensor loss;             // scalar: mean cross-entropy over scored positions
  torch::Tensor counts;           // (3,) int64 on the logits' device: the three counts below
  int64_t correct_tokens = 0;     // argmax == target at scored positions
  int64_t scored_tokens = 0;
  int64_t correct_sequences = 0;  // rows whose every scored position is correct
  int64_t sequences = 0;
};

// The mean cross-entropy over batch.scored: logits (B, T, C) -> scalar. `select_scored` picks
// those tokens first (the CPU's way, whose figures the tests pin); otherwise the others are
// ignored (ignore_index), which reads nothing back from a GPU (a selection's size would be)
// and so can be part of a CUDA graph. The two agree to float rounding.
torch::Tensor scored_cross_entropy(const torch::Tensor& logits, const Batch& batch, bool select_scored);

// logits: (B, T, C) -> loss and counts on batch.scored (scored_cross_entropy, selecting on the
// CPU only); with read_counts false the counts stay in `counts` on the device (nothing waits
// for it) and the integers are 0.
BatchScore score_batch(const torch::Tensor& logits, const Batch& batch, bool read_counts = true);

struct ChanceScore {
  double token_accuracy = 0;     // share of scored targets equal to the constant prediction
  double sequence_accuracy = 0;  // share of sequences whose every scored target equals it
  double loss = 0;               // cross-entropy (nats) of the empirical target distribution
};

// The chance level of an evaluation set: the best input-independent prediction, which
// predicts the most frequent target of each position (per_position) or of all positions,
// and the entropy of those target distributions as its loss: what a model that ignores its
// input scores at best per token. Its sequence accuracy is that prediction's exact match (where
// whole sequences repeat, the most frequent one can score more). Estimated on the evaluation
// set itself without the optimism of picking the mode on the scored targets: the mode of the
// even rows scores the odd rows and the other way round (a position the fitting rows never
// score takes their mode over all positions); the entropy gets the Miller-Madow correction.
// The position-free baseline of an evaluation set: the share of scored targets, and of
// sequences, that Batch::position_free gets right; NaN where no batch carries one.
struct PositionFreeScore {
  double token_accuracy = NAN, sequence_accuracy = NAN;
};
class PositionFreeLevel {
 public:
  void add(const Batch& batch);
  PositionFreeScore score() const;

 private:
  bool defined_ = false;
  int64_t correct_ = 0, scored_ = 0, correct_sequences_ = 0, sequences_ = 0;
};

class ChanceLevel {
 public:
  ChanceLevel(int64_t num_classes, bool per_position) : num_classes_(num_classes), per_position_(per_position) {}
  void add(const Batch& batch);  // every batch of one evaluation set has the same T
  ChanceScore score() const;

 private:
  int64_t num_classes_;
  bool per_position_;
  std::vector<torch::Tensor> targets_, scored_;  // (B, T) each, on the CPU
};

}  // namespace pelab
