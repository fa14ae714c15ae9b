// LayerNorm over the last dimension of float32 rows, and its gradient (torch-free;
// core/model/layer_norm.h is the autograd function), as torch::layer_norm computes it:
//   y = (x - mean) rstd weight + bias,  rstd = 1 / sqrt(var + eps), var the biased variance,
// mean and variance by two passes over the row (which stays in the L1 cache). Rows of
// d_model 64 are too short for ATen's kernel, whose per-row overhead dominates them: these
// loops are whole vectors along the row.
// Compiled for AVX-512, AVX2 + FMA and baseline x86-64 (core/kernels/instruction_sets.h).
#pragma once

#include <cstdint>

#include "core/kernels/instruction_sets.h"

namespace pelab::kernels {

// y (rows, cols) from x (rows, cols), weight and bias (cols); mean and rstd (rows) kept
// for the backward
void layer_norm_forward(const float* x, const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, int64_t rows, int64_t cols);

// grad_x = rstd (g - mean_c g - xhat mean_c(g xhat)), g = grad_y weight, xhat = (x - mean)
// rstd; weight_sums[c] += sum_r grad_y xhat and bias_sums[c] += sum_r grad_y (each unless null)
void layer_norm_backward(const float* x, const float* weight, const float* mean, const float* rstd,
                         const float* grad_y, float* grad_x, float* weight_sums, float* bias_sums, int64_t rows,
                         int64_t cols);

}  // namespace pelab::kernels
