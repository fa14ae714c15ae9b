// LayerNorm over the last dimension as one autograd function on float32 CPU tensors,
// computed by core/kernels/layer_norm.h in row chunks (the weight's and bias's
// gradients summed per chunk, in chunk order: the same for any thread count); any other
// tensor (CUDA, bf16 under autocast, float64), or a norm without weight and bias, goes to
// torch::layer_norm.
#pragma once

#include <torch/torch.h>

namespace pelab {

// x: (..., C); weight, bias: (C) -> (..., C), contiguous
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);

// A torch::nn::LayerNorm module's norm by layer_norm above (its weight, bias and eps).
torch::Tensor layer_norm(torch::nn::LayerNorm& norm, const torch::Tensor& x);

}  // namespace pelab
