// Position samplers: which positions a batch of T tokens gets, independently of the scheme.
//   contiguous     0, 1, ..., T - 1
//   random_offset  s, s + 1, ..., s + T - 1 with s uniform in [0, L_max - T]
//   randomized     a sorted sample of T distinct positions from [0, L_max) (Ruoss et al. 2023,
//                  "Randomized Positional Encodings Boost Length Generalization of
//                  Transformers"; google-deepmind/randomized_positional_encodings
//                  noisy_fixed_positional_encodings: jrandom.choice without replacement, sorted)
// One draw per batch, shared by its rows (as the reference), so positions stay (1, T)
// broadcasts and relative schemes compute once per batch.
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

  // Positions for B sequences of T tokens: (B, T) views of one (1, T) draw.
  Positions sample(int64_t batch, int64_t length, std::mt19937_64& rng, torch::Device device) const;
  // The sorted, distinct sample of `count` positions from [0, range).
  static std::vector<int64_t> randomized(int64_t count, int64_t range, std::mt19937_64& rng);
  // The largest position the sampler can produce for sequences of T tokens, plus one.
  int64_t position_range(int64_t length) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int64_t max_length_;
};

}  // namespace pelab
