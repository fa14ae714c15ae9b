// `kerple`: Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
// Extrapolation" (chijames/KERPLE megatron/mpu/layers.py, ParallelKerpleLog and
// ParallelKerplePower). Conditionally positive definite kernels of the distance |i - j|
// (query - key; the reference is causal and uses i - j >= 0, bidirectional mode uses |i - j|):
//   variant log:    bias = -r1 log(1 + r2 |i - j|)     r1 ~ U(0, 2), r2 ~ U(0, 1)
//   variant power:  bias = -r1 |i - j|^r2              r1 ~ U(0, 1), r2 ~ U(0, 2)
// r1, r2 are per head and shared by all layers (one module in the reference). As in the
// reference, every forward pass clamps them in place: both >= 1e-2, and the power's
// exponent r2 <= 2. Added to the scaled scores, not scaled.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class KerpleImpl : public PositionEncodingImpl {
 public:
  KerpleImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // The kernel of distances (R) for every head: (H, R).
  torch::Tensor kernel(const torch::Tensor& distance);

  static constexpr double kEps = 1e-2;

 private:
  bool log_;
  torch::Tensor r1_, r2_;  // (H)
};

}  // namespace pelab
