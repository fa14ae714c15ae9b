// `stick_breaking`: stick-breaking attention (Tan et al. 2024, "Scaling Stick-Breaking Attention:
// An Efficient Implementation and In-Depth Study"; flash-linear-attention's
// naive_stickbreaking_attn). No softmax: query i gives key j a share of its attention, the
// nearest key first, each taking a sigmoid of what the nearer ones left:
//   A_ij = beta_ij prod_{j < k < i} (1 - beta_ik),   beta_ij = sigmoid(z_ij),   z_ij = q_i . k_j * scale
//   log A_ij = log sigmoid(z_ij) + sum_{j < k < i} log sigmoid(-z_ik)
// for keys j < i (j <= i with attend_current, the query's own key breaking first); what is left,
// 1 - sum_j A_ij, goes nowhere (the first query of a sequence attends to nothing). No other
// position information: positions are not read. Defined for causal attention only: the
// breaking runs from the query backwards.
#pragma once

#include "core/config/options.h"
#include "core/encodings/position_encoding.h"

namespace pelab {

class StickBreakingImpl : public PositionEncodingImpl {
 public:
  StickBreakingImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
  static bool causal_only() { return true; }

  bool replaces_softmax() const override { return true; }
  // scores: (B, H, Tq, Tk); masked: (B|1, 1, Tq|1, Tk) bool or undefined -> (B, H, Tq, Tk)
  torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                  const AttentionContext& attention) override;
  // float32 on the CPU: the fused kernels (core/kernels/stick_breaking.h), which keep no
  // (B, H, T, T) tensor; elsewhere undefined (attention_weights on the scores)
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_mask, const AttentionContext& attention) override;

 private:
  bool attend_current_;
};

}  // namespace pelab
