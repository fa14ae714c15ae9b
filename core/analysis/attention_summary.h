// Where each head attends: summary statistics of attention probabilities over evaluation
// examples, and stored attention maps of a few examples.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/score_terms.h"
#include "core/encodings/position_encoding.h"
#include "core/model/encoder.h"
#include "data/task.h"

namespace pelab {

// Means over every (example, query) of non-padding queries, one value per (layer, head),
// stored row-major as layers x heads.
struct AttentionSummary {
  int64_t layers = 0, heads = 0;
  std::vector<double> mean_distance;  // sum_j p_ij |i - j|, in tokens
  std::vector<double> entropy;        // -sum_j p_ij ln p_ij, in nats
  std::vector<double> diagonal;       // p_ii
  std::vector<double> first;          // p_i0, attention on the first token
  std::vector<double> last;           // attention on the last non-padding token
  bool empty() const { return layers == 0; }
};

// One layer's statistics summed over the non-padding queries of a batch: (5, H) float64, rows
// mean distance, entropy, diagonal, first, last (AttentionSummary's order, before the mean).
// p: (B, H, T, T); padding: (B, T) bool. On the CPU one pass over p without temporaries; on
// other devices (and as the tests' reference) attention_statistic_sums_torch, in tensor ops.
torch::Tensor attention_statistic_sums(const torch::Tensor& p, const torch::Tensor& padding);
torch::Tensor attention_statistic_sums_torch(const torch::Tensor& p, const torch::Tensor& padding);

class AttentionSummaryAccumulator {
 public:
  // probs: num_layers x (B, H, T, T); padding: (B, T) bool
  void add(const std::vector<torch::Tensor>& probs, const torch::Tensor& padding);
  AttentionSummary summary() const;

 private:
  torch::Tensor sums_;  // (5, layers, heads) float64
  double queries_ = 0;
};

// Attention maps of `examples` evaluation examples at one length.
struct AttentionMaps {
  int64_t length = 0;
  torch::Tensor probs;      // (N, layers, heads, T, T) float32 (CPU)
  torch::Tensor tokens;     // (N, T) int64
  torch::Tensor positions;  // (N, T) int64 (float64 from a continuous sampler): the key positions the encoding saw
  std::string method = "none";  // the extrapolation method they were made under
  int64_t step = 0;         // the settings they were made under, as an evaluation row's
  std::string sampler = "contiguous";
  int64_t positions_max_length = 0;
  ScoreTermStatistics terms;  // the attention terms of these examples (score_terms.h)
};

}  // namespace pelab
