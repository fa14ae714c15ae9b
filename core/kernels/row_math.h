// Dot products and scaled additions along one head's Dh numbers, and a row's softmax, for the
// row kernels of the data-dependent schemes (stick_breaking.cpp, path_transport.cpp): plain loops the compiler
// vectorizes (`omp simd` under -fopenmp-simd; CMakeLists.txt), one copy for every CPU. (The
// fused attention kernels' own, per instruction set, are in attention_products.h.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/kernels/vector_math.h"  // exp_nonpositive

namespace pelab::kernels {

// a . b over n numbers
inline float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// out += scale x over n numbers
inline void add_scaled(float* out, const float* x, float scale, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) out[d] += scale * x[d];
}

// row[0, n) <- softmax(row[0, n)), returning its log-sum-exp; where every entry is -inf (every
// key masked) the row becomes 0 and the result +inf, so that a backward's exp(s - lse) is 0 too
inline float softmax_in_place(float* row, int64_t n) {
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  float largest = -kInfinity;
  for (int64_t j = 0; j < n; ++j) largest = std::max(largest, row[j]);
  if (largest == -kInfinity) {
    std::fill(row, row + n, 0.0f);
    return kInfinity;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    row[j] = exp_nonpositive(row[j] - largest);
    sum += row[j];
  }
  const float inverse = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] *= inverse;
  return largest + std::log(sum);
}

}  // namespace pelab::kernels
