// Stick-breaking attention as one autograd function on the CPU, computed by the fused kernels of
// core/kernels/stick_breaking.h: the scores and weights are made one query row at a time, in the
// forward and again in the backward, so memory grows with T, not T^2 (the unfused path keeps
// several (B, H, T, T) tensors for autograd).
#pragma once

#include <torch/torch.h>

namespace pelab {

// q, k, v: (B, H, T, Dh) float32 CPU, any strides with unit stride along Dh; key_mask: additive
// (B|1, 1, T|1, T), -inf at masked keys, or undefined; causal always. -> (B, H, T, Dh)
torch::Tensor stick_breaking_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, const torch::Tensor& key_mask, bool attend_current);

}  // namespace pelab
