// Multi-head self-attention with the position-encoding hooks at fixed places.
#pragma once

#include <torch/torch.h>

#include "core/encodings/position_encoding.h"
#include "core/model/attention_mask.h"

namespace pelab {

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(int64_t d_model, int64_t num_heads, double attention_dropout, int64_t layer);

  // x: (B, T, D); mask: which keys each query may not see; -> (B, T, D).
  // When `probs_out` is given it receives the attention probabilities (B, H, T, T).
  torch::Tensor forward(const torch::Tensor& x, const AttentionMask& mask, const Positions& positions,
                        PositionEncodingImpl& encoding, torch::Tensor* probs_out = nullptr);

 private:
  int64_t num_heads_, layer_;
  torch::nn::Linear qkv_{nullptr}, out_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

// Tests: with LibTorch >= 2, take the scaled_dot_product_attention branch (the GPU's) on the
// CPU too, wherever the scheme allows it, instead of the fused kernel; process-wide.
void use_sdpa_on_cpu(bool on);

}  // namespace pelab
