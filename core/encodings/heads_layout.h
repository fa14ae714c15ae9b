// Tensors in the attention projection's memory order, for schemes that produce q or k
// themselves (rotary) and for the fused attention's gradients.
#pragma once

#include <torch/torch.h>

namespace pelab {

// An uninitialized (B, H, T, Dh) tensor like `like` (B, H, T, Dh), in (B, T, H, Dh) memory:
// the order of the attention projection's output, so that heads merge back into (B, T, D)
// without a copy (the fused attention's gradients, a rotary scheme's rotated q and k).
inline torch::Tensor empty_heads_last(const torch::Tensor& like) {
  return torch::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options()).transpose(1, 2);
}

}  // namespace pelab
