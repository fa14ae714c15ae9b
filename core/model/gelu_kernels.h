// GELU, the exact (erf) form that torch::gelu computes by default, and its derivative, over
// float32 arrays (torch-free; core/model/gelu.h is the autograd function):
//   gelu(x) = x Phi(x),  gelu'(x) = Phi(x) + x phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
// Phi is computed from erfc's Abramowitz-Stegun 7.1.26 form, as ATen's vectorized GELU
// does, but without its cancellation for negative x: absolute error of Phi below 1e-7 (and
// in the negative tail a relative error of 0.4% at x = -6, where 1 - erfc / 2 rounds to 1).
// One exp per element serves Phi and phi (LibTorch's backward computes two, plus a
// division, in AVX2 at best). Compiled for AVX-512, AVX2 + FMA and baseline x86-64
// (core/model/instruction_sets.h).
#pragma once

#include <cstdint>

#include "core/model/instruction_sets.h"

namespace pelab::kernels {

// y[i] = gelu(x[i]) for i < n
void gelu_forward(const float* x, float* y, int64_t n);

// grad_x[i] = grad_y[i] gelu'(x[i]) for i < n
void gelu_backward(const float* x, const float* grad_y, float* grad_x, int64_t n);

}  // namespace pelab::kernels
