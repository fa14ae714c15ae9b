// GELU, the exact (erf) form that torch::gelu computes by default, and its derivative, over
// float32 arrays (torch-free; core/model/gelu.h is the autograd function):
//   gelu(x) = x Phi(x),  gelu'(x) = Phi(x) + x phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
// Phi is computed from erfc's Abramowitz-Stegun 7.1.26 form, as ATen's vectorized GELU
// does, but without its cancellation for negative x: absolute error of Phi below 1e-7 (and
// in the negative tail a relative error of 0.4% at x = -6, where 1 - erfc / 2 rounds to 1).
// One exp per element serves Phi and phi (LibTorch's backward computes two, plus a
// division, in AVX2 at best). Compiled for AVX-512, AVX2 + FMA and baseline x86-64
// (core/kernels/instruction_sets.h).
#pragma once

#include <cstdint>

#include "core/kernels/instruction_sets.h"

namespace pelab::kernels {

// y[r, c] = gelu(x[r, c] + bias[c]) for r < rows, c < cols: row-major, rows cols apart;
// bias null: no bias (the feed-forward's first linear layer leaves its bias add to this pass)
void gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);

// grad_x[r, c] = grad_y[r, c] gelu'(x[r, c] + bias[c]), and column_sums[c] += sum_r
// grad_x[r, c] unless column_sums is null (the bias's gradient, in the same pass)
void gelu_backward(const float* x, const float* bias, const float* grad_y, float* grad_x, float* column_sums,
                   int64_t rows, int64_t cols);

}  // namespace pelab::kernels
