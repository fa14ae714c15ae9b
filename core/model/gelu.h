// The feed-forward GELU (exact erf form, as torch::gelu's default) as one autograd function
// on float32 CPU tensors, computed by core/kernels/gelu.h in parallel chunks, with the
// first linear layer's bias folded in (its add and its gradient's sum over the rows would
// each be another pass over the (B, T, d_ff) array); any other tensor (CUDA, bf16 under
// autocast, float64) goes to torch::gelu(x + bias). Keeps x and the bias for the backward.
#pragma once

#include <torch/torch.h>

namespace pelab {

// gelu(x + bias), bias (C) added along x's last dimension (C) in the same pass (undefined:
// gelu(x)); the bias's gradient is summed in the backward's pass.
torch::Tensor gelu_activation(const torch::Tensor& x, const torch::Tensor& bias = {});

}  // namespace pelab
