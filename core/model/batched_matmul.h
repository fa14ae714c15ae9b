// Batched matrix products for attention, parallel over the batch: each thread multiplies
// whole matrices with a single-threaded BLAS call (OpenBLAS runs single-threaded inside an
// OpenMP region), instead of every thread sharing each small product: faster for q k^T
// (a (T, T) output from an inner dimension of Dh), the same for p v (docs/performance.md).
// Autograd: the gradients are two more such products.
#pragma once

#include <torch/torch.h>

namespace pelab {

// a: (..., n, k), b: (..., k, m) with the same leading dimensions -> (..., n, m).
torch::Tensor batch_parallel_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace pelab
