// `fope`: Fourier Position Embedding (Hua et al. 2024, "Fourier Position Embedding: Enhancing
// Attention's Periodic Extension for Length Generalization"; the authors' OLMo code,
// olmo/model.py FourierEmbedding, configs "fourier-eye_xavier_norm-sep_basis_head-
// ignore_clamp_zero"). RoPE's rotation of q and k, half-split pairs, with two changes:
//  - frequencies too low to complete a period within the training length are clipped to zero:
//    of RoPE's theta_i = base^(-2i/Dh), those with theta_i < 2 pi / max_length are dropped from
//    the basis, leaving K;
//  - each rotated pair d of head h sees a Fourier series of the K kept frequencies instead of
//    one: cos_hd(p) = sum_k cos(theta_k p) C_h[k, d], sin_hd(p) = sum_k sin(theta_k p) S_h[k, d],
//    for the first P = min(K, Dh/4) pairs; the other Dh/2 - P pairs get frequency zero (no
//    rotation). C and S start as a strided identity (pair d on frequency d ceil(K/P)) plus
//    N(0, sigma^2).
// The pair (x1, x2) becomes (x1 cos - x2 sin, x1 sin + x2 cos), as in RoPE. With sigma > 0
// q.k depends on absolute positions too (the series is not one rotation).
#pragma once

#include "core/config/options.h"
#include "core/encodings/position_encoding.h"

namespace pelab {

class FopeImpl : public PositionEncodingImpl {
 public:
  FopeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  // q, k: (B, H, T, Dh) -> the same, rotated by their positions' series
  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  bool shift_invariant() const override { return false; }

  // cos and sin of every head and pair at positions (B'|1, T): 2 x (B'|1, H, T, Dh/2) float32
  std::pair<torch::Tensor, torch::Tensor> tables(const torch::Tensor& positions) const;
  // The kept frequencies theta_k: (K) float64
  const torch::Tensor& frequencies() const { return frequencies_; }

 private:
  // x: (B, H, T, Dh) rotated at positions (B'|1, T)
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;

  torch::Tensor frequencies_;  // (K) float64, on the CPU
  torch::Tensor cos_coefficients_, sin_coefficients_;  // (H, K, P): parameters, or buffers when fixed
};

}  // namespace pelab
