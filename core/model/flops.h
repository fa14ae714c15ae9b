// Floating-point operations of the shared encoder, counted the standard way (a multiply-add
// is 2 FLOPs; a training step is the forward pass plus a backward pass of twice its cost).
// Only the matrix products of the shared model are counted; what a position-encoding scheme
// adds shows up as time, not as FLOPs, so a scheme's achieved GFLOP/s is comparable to none's.
// Torch-free.
#pragma once

#include <cstdint>

#include "core/config/config.h"

namespace pelab {

// One forward pass over `batch` sequences of T tokens:
//   per block 2BT(3D^2 + D^2) (qkv and output projections) + 2 * 2BT^2 D (QK^T and PV; causal:
//   only the T (T + 1) / 2 pairs of a query and the keys up to it, as the kernels compute)
//   + 2 * 2BTDF (feed-forward), plus 2BTDC for the output head.
double encoder_forward_flops(const ModelConfig& model, int64_t batch, int64_t tokens, int64_t num_classes);
// Forward + backward: 3x the forward pass.
inline double encoder_training_flops(const ModelConfig& model, int64_t batch, int64_t tokens, int64_t num_classes) {
  return 3.0 * encoder_forward_flops(model, batch, tokens, num_classes);
}

}  // namespace pelab
