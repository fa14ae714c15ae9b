// `sinusoidal`: fixed sinusoids of Vaswani et al. 2017, section 3.5:
//   PE(p, 2i) = sin(p / base^(2i/D)),  PE(p, 2i+1) = cos(p / base^(2i/D)),  base = 10000.
// layout `interleaved` (default) is that formula; `concatenated` puts all sines first,
// [sin | cos] with the same frequencies, as DeepMind's randomized_positional_encodings
// (models/positional_encodings.py, sinusoid_position_encoding); `concatenated_t2t` is
// tensor2tensor's get_timing_signal_1d: [sin | cos] with frequencies base^(-i/(D/2-1)).
// Absolute encoding: it reads `Positions::query`.
// No parameters; the table is computed on the fly so it never lands in a checkpoint.
#pragma once

#include "core/encodings/additive.h"

namespace pelab {

// Sinusoids of `values` (any shape, integer or float) -> (..., dim) float32, computed in
// float64. layout: "interleaved" | "concatenated" | "concatenated_t2t" (see above).
torch::Tensor sinusoid_table(const torch::Tensor& values, int64_t dim, double base, const std::string& layout);

class SinusoidalPositionEncodingImpl : public AdditivePositionEncodingImpl {
 public:
  SinusoidalPositionEncodingImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  // positions: (B, T) int64 -> (B, T, D) float32 (times the block's scale with
  // every_layer_scaled)
  torch::Tensor position_vectors(const torch::Tensor& positions, int64_t layer) override;

 private:
  std::string layout_;
  double base_;
  torch::Tensor layer_scale_;  // (num_layers), 1 at the start: inject every_layer_scaled
};

}  // namespace pelab
