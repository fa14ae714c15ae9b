// Position samplers: which positions a batch of T tokens gets, independently of the scheme.
//   contiguous     0, 1, ..., T - 1
//   random_offset  s, s + 1, ..., s + T - 1 with s uniform in [0, L_max - T]
//   randomized     a sorted sample of T distinct positions from [0, L_max) (Ruoss et al. 2023,
//                  "Randomized Positional Encodings Boost Length Generalization of
//                  Transformers"; google-deepmind/randomized_positional_encodings
//                  noisy_fixed_positional_encodings: jrandom.choice without replacement, sorted)
//   cape           real-valued (p + Delta + epsilon_p) * lambda, p = 0..T-1, Delta ~ U[-Delta_max,
//                  Delta_max], epsilon_p ~ U[-epsilon_max, epsilon_max] per position, ln lambda ~
//                  U[-ln lambda_max, ln lambda_max] (Likhomanenko et al. 2021, "CAPE: Encoding
//                  Relative Positions with Continuous Augmented Positional Embeddings", the
//                  paper's cape_positions_1d); training only: evaluation uses 0..T-1, as the paper
//   random_float   T sorted uniform reals from [0, L_max) (Shimizu et al. 2026, Random Float
//                  Sampling), at training and evaluation
// One draw per batch, shared by its rows (as the Ruoss et al. reference; CAPE's draws per
// sequence), so positions stay (1, T) broadcasts and relative schemes compute once per batch.
#pragma once

#include <torch/torch.h>

#include <random>
#include <vector>

#include "core/encodings/position_encoding.h"
#include "core/config/config.h"

namespace pelab {

class PositionSampler {
 public:
  explicit PositionSampler(const PositionsConfig& config);

  // Positions for B sequences of T tokens: (B, T) views of one (1, T) draw (int64, float64 for
  // the continuous samplers).
  Positions sample(int64_t batch, int64_t length, std::mt19937_64& rng, torch::Device device) const;
  // What evaluation uses with positions.evaluate_with: sampler: the sampler's draw, but 0..T-1
  // for cape (an augmentation of training).
  Positions sample_for_evaluation(int64_t batch, int64_t length, std::mt19937_64& rng, torch::Device device) const;
  // Whether the sampler draws real-valued positions.
  bool continuous() const { return name_ == "cape" || name_ == "random_float"; }
  // Whether it augments training only (cape): evaluation then uses 0..T-1.
  bool training_only() const { return name_ == "cape"; }
  // The sorted, distinct sample of `count` positions from [0, range).
  static std::vector<int64_t> randomized(int64_t count, int64_t range, std::mt19937_64& rng);
  // The largest position the sampler can produce for sequences of T tokens, plus one
  // (continuous samplers: rounded up).
  int64_t position_range(int64_t length) const;
  // The sorted draw of `count` uniform reals from [0, range).
  static std::vector<double> random_floats(int64_t count, double range, std::mt19937_64& rng);
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int64_t max_length_;
  double global_shift_, local_shift_, global_scaling_;
};

}  // namespace pelab
