// Shared pieces of pelab's torch-free CPU kernels (attention_kernels.cpp, gelu_kernels.cpp):
// vector types, loads and stores that GCC turns into single instructions, a vectorizable
// exp, and the attributes that compile a function once per instruction set. Include only
// from kernel sources: the helpers are forced inline, so that each instruction set's copy
// of a kernel compiles them for its own registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/model/instruction_sets.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PELAB_X86_DISPATCH 1
#define PELAB_AVX2 __attribute__((target("avx2,fma")))
#define PELAB_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif
#define PELAB_INLINE __attribute__((always_inline)) inline

namespace pelab::kernels {

// The copy of a kernel for the instruction set in use (core/model/instruction_sets.h): each
// kernel entry point is `return pick_copy(f_baseline, f_avx2, f_avx512)(arguments);`.
#ifdef PELAB_X86_DISPATCH
template <class Function>
Function pick_copy(Function baseline, Function avx2, Function avx512) {
  switch (instruction_set()) {
    case InstructionSet::avx512: return avx512;
    case InstructionSet::avx2: return avx2;
    case InstructionSet::baseline: break;
  }
  return baseline;
}
#define PELAB_PICK_COPY(f) pick_copy(f##_baseline, f##_avx2, f##_avx512)
#else
#define PELAB_PICK_COPY(f) f##_baseline
#endif

// Sixteen and eight floats as one value (GCC/Clang vector extension): one AVX-512 register,
// two AVX2 ones or four SSE ones (Float16); one AVX register or two SSE ones (Float8).
typedef float Float16 __attribute__((vector_size(64)));
typedef float Float8 __attribute__((vector_size(32)));
template <class V>
PELAB_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
PELAB_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// The sum and the maximum of a Float16's lanes, as a tree of halvings (4 dependent steps,
// not a chain of 16).
PELAB_INLINE float horizontal_sum(Float16 v) {
  const Float8 eight = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                       __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  typedef float Float4 __attribute__((vector_size(16)));
  const Float4 four = __builtin_shufflevector(eight, eight, 0, 1, 2, 3) + __builtin_shufflevector(eight, eight, 4, 5, 6, 7);
  return (four[0] + four[2]) + (four[1] + four[3]);
}
PELAB_INLINE float horizontal_max(Float16 v) {
  const Float8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
               hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Float8 eight = lo > hi ? lo : hi;
  typedef float Float4 __attribute__((vector_size(16)));
  const Float4 a = __builtin_shufflevector(eight, eight, 0, 1, 2, 3), b = __builtin_shufflevector(eight, eight, 4, 5, 6, 7);
  const Float4 four = a > b ? a : b;
  return std::max(std::max(four[0], four[2]), std::max(four[1], four[3]));
}

// exp(x) for x <= 0, -inf -> 0, NaN -> NaN; relative error below 2e-7 (range reduction by
// ln 2, degree-6 Taylor polynomial on |r| <= ln(2)/2). Branch-free: loops over it vectorize
// (with -fno-trapping-math, so that the range checks become selects).
PELAB_INLINE float exp_nonpositive(float x) {
  const float t = std::max(x, -87.0f);             // NaN stays NaN
  const float finite = t == t ? t : 0.0f;          // the exponent path never sees NaN
  const float n = std::floor(finite * 1.44269504088896341f + 0.5f);
  const float r = t - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return x < -87.0f ? 0.0f : p * two_to_n;
}

}  // namespace pelab::kernels
