// The feed-forward GELU (exact erf form, as torch::gelu's default) as one autograd function
// on float32 CPU tensors, computed by core/model/gelu_kernels.h in parallel chunks; any
// other tensor (CUDA, bf16 under autocast, float64) goes to torch::gelu. Keeps x for the
// backward, as torch::gelu does.
#pragma once

#include <torch/torch.h>

namespace pelab {

torch::Tensor gelu_activation(const torch::Tensor& x);

}  // namespace pelab
