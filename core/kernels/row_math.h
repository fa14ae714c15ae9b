// Dot products and scaled additions along one head's Dh numbers, for the row kernels of the
// data-dependent schemes (stick_breaking.cpp, path_transport.cpp): plain loops the compiler
// vectorizes (`omp simd` under -fopenmp-simd; CMakeLists.txt), one copy for every CPU. (The
// fused attention kernels' own, per instruction set, are in attention_products.h.)
#pragma once

#include <cstdint>

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

}  // namespace pelab::kernels
