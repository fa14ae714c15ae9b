// Rotary machinery shared by `rope` and `xpos`: rotate pairs of q and k features by
// position * base^(-2i/R) (Su et al. 2021, RoFormer), on the first R dimensions of each head.
//   interleaved pairs (x0, x1), (x2, x3), ...       RoFormer, x-transformers, DeepMind
//   half split pairs  (x_i, x_{i + R/2})            GPT-NeoX, LLaMA
// Evaluation-time extrapolation by factor s = test / training sequence length, in tokens (s > 1 only):
//   interpolation: positions / s                    (Chen et al. 2023, position interpolation)
//   ntk:           base * s^(R / (R - 2))            (NTK-aware scaling, bloc97 2023)
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class RotaryImpl : public PositionEncodingImpl {
 public:
  RotaryImpl(const EncodingContext& context, int64_t rotary_dims, bool interleaved, double base);

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  bool supports_extrapolation() const override { return true; }
  void set_extrapolation(const std::string& method, double factor) override;

  // Rotation angles of positions (B'|1, T) -> (B'|1, T, R/2) float32 (computed in float64).
  torch::Tensor angles(const torch::Tensor& positions) const;
  // x: (B, H, T, Dh) rotated by the angles of positions (B'|1 or B, T) -> (B, H, T, Dh)
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;
  int64_t rotary_dims() const { return rotary_dims_; }

 protected:
  int64_t rotary_dims_;
  bool interleaved_;
  double base_;
  std::string method_ = "none";
  double factor_ = 1.0;
};

}  // namespace pelab
