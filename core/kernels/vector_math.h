// Shared pieces of pelab's torch-free CPU kernels (attention.cpp, gelu.cpp, layer_norm.cpp):
// vector types, loads and stores that GCC turns into single instructions, a vectorizable
// exp, and the attributes that compile a function once per instruction set. Include only
// from kernel sources: the helpers are forced inline, so that each instruction set's copy
// of a kernel compiles them for its own registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/kernels/instruction_sets.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PELAB_X86_DISPATCH 1
#define PELAB_AVX2 __attribute__((target("avx2,fma")))
#define PELAB_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif
// Helpers the instruction-set copies share are forced inline, so that each copy compiles
// them for its own target. A lambda inside them is not: if GCC does not inline it (a large
// body), it is compiled once for the default target, with the copy's vectors on the stack
// (several times slower); write such pieces as PELAB_INLINE functions.
#define PELAB_INLINE __attribute__((always_inline)) inline

namespace pelab::kernels {

// The copy of a kernel for the instruction set in use (core/kernels/instruction_sets.h): each
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

// Sixteen, eight and four floats as one value (GCC/Clang vector extension): one AVX-512 register
// (Float16), one AVX register (Float8), one SSE register (Float4). A kernel's copy for an
// instruction set works on that set's own width: a type wider than its registers (Float16 in
// the AVX2 copy) has no machine mode there, so GCC keeps such values on the stack and goes
// through memory for every operation (slower even than the SSE copy; docs/performance.md).
typedef float Float16 __attribute__((vector_size(64)));
typedef float Float8 __attribute__((vector_size(32)));
typedef float Float4 __attribute__((vector_size(16)));
template <class V>
constexpr int64_t kLanesOf = sizeof(V) / sizeof(float);
// 32-bit integer lanes as many as V's: lane indices for permute.
template <class V>
struct LaneIndicesOf {
  typedef int32_t Type __attribute__((vector_size(sizeof(V))));
};
template <class V>
using LaneIndices = typename LaneIndicesOf<V>::Type;

// Lane i of the result is v[index[i]] (indices 0 .. lanes - 1): one vpermps on AVX2 and
// AVX-512 (GCC's variable shuffle; lane by lane elsewhere).
template <class V>
PELAB_INLINE V permute(V v, LaneIndices<V> index) {
#if defined(__GNUC__) && !defined(__clang__)
  return __builtin_shuffle(v, index);
#else
  V out;
  for (int64_t i = 0; i < kLanesOf<V>; ++i) out[i] = v[index[i] & (kLanesOf<V> - 1)];
  return out;
#endif
}
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

// Streaming stores (MOVNTPS): whole 64-byte lines written straight to memory, without first
// reading them into the cache (a plain store's read for ownership) and without evicting
// cached operands. For outputs of many MB that are read back only later (the attention
// probabilities, saved for the backward; a full bias's gradient; docs/performance.md has
// the bandwidths). Each struct stores its instruction set's widest vector (`Vector`) at an
// address aligned to its size; a kernel that used them calls stream_fence() before its
// output is read (streaming stores are weakly ordered).
#ifdef PELAB_X86_DISPATCH
// (Inline assembly, not the intrinsics: these are inlined through the kernels' target-free
// templates, where GCC refuses to inline a target-specific intrinsic; the assembly takes
// its registers in the instruction-set copy the template finally lands in.)
struct BaselineStores {
  using Vector = Float4;
  PELAB_INLINE static void stream(float* p, Float4 v) {
    asm("movntps %1, %0" : "=m"(*reinterpret_cast<Float4*>(p)) : "x"(v));
  }
};
struct Avx2Stores {
  using Vector = Float8;
  PELAB_INLINE static void stream(float* p, Float8 v) {
    asm("vmovntps %1, %0" : "=m"(*reinterpret_cast<Float8*>(p)) : "x"(v));
  }
};
struct Avx512Stores {
  using Vector = Float16;
  PELAB_INLINE static void stream(float* p, Float16 v) {
    asm("vmovntps %1, %0" : "=m"(*reinterpret_cast<Float16*>(p)) : "v"(v));
  }
};
PELAB_INLINE void stream_fence() { asm volatile("sfence" ::: "memory"); }
#else
struct BaselineStores {
  using Vector = Float4;
  PELAB_INLINE static void stream(float* p, Float4 v) { store(p, v); }
};
PELAB_INLINE void stream_fence() {}
#endif

// dst[j] = factor * src[j] for j < n: the 64-byte aligned lines of dst by the instruction
// set's streaming stores (its own vector width: a wider vector type than the instruction set
// has registers for lives on the stack, see `Lanes`), the ends by plain ones. dst: 4-byte
// aligned floats.
template <class Stores>
PELAB_INLINE void copy_streaming(const float* __restrict src, float* __restrict dst, int64_t n, float factor = 1.0f) {
  using V = typename Stores::Vector;
  constexpr int64_t kWidth = sizeof(V) / sizeof(float);
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) / sizeof(float) % 16);
  const int64_t head = std::min<int64_t>(n, misaligned ? 16 - misaligned : 0);
  int64_t j = 0;
  for (; j < head; ++j) dst[j] = factor * src[j];
  for (; j + 16 <= n; j += 16)
    for (int64_t k = 0; k < 16; k += kWidth) Stores::stream(dst + j + k, factor * load<V>(src + j + k));
  for (; j < n; ++j) dst[j] = factor * src[j];
}

// The sum and the maximum of a vector's lanes, as a tree of halvings (4 dependent steps for
// 16 lanes, not a chain of 16).
PELAB_INLINE float horizontal_sum(Float4 four) { return (four[0] + four[2]) + (four[1] + four[3]); }
PELAB_INLINE float horizontal_sum(Float8 eight) {
  return horizontal_sum(
      Float4(__builtin_shufflevector(eight, eight, 0, 1, 2, 3) + __builtin_shufflevector(eight, eight, 4, 5, 6, 7)));
}
PELAB_INLINE float horizontal_sum(Float16 v) {
  return horizontal_sum(Float8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)));
}
PELAB_INLINE float horizontal_max(Float4 four) {
  return std::max(std::max(four[0], four[2]), std::max(four[1], four[3]));
}
PELAB_INLINE float horizontal_max(Float8 eight) {
  const Float4 a = __builtin_shufflevector(eight, eight, 0, 1, 2, 3), b = __builtin_shufflevector(eight, eight, 4, 5, 6, 7);
  return horizontal_max(Float4(a > b ? a : b));
}
PELAB_INLINE float horizontal_max(Float16 v) {
  const Float8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
               hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return horizontal_max(Float8(lo > hi ? lo : hi));
}

// exp(x) for x <= 0, -inf -> 0, NaN -> NaN; relative error below 3e-7 (range reduction by
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

// exp of a vector's lanes (Float16, Float8, Float4), x <= 0, as exp_nonpositive above (the
// same reduction and polynomial, -inf -> 0, NaN -> NaN), written on whole vectors: the
// compiler's vectorization of the scalar function evaluated the polynomial twice and blended
// the range cases (about 45 instructions per vector; this is about 20). n = round(x / ln 2) comes from adding 1.5 *
// 2^23, which leaves n in the low bits of the sum's representation: 2^n is those bits
// shifted into the exponent field (no float-to-integer conversion, which NaN would make
// undefined).
template <class V>
PELAB_INLINE V exp_nonpositive_lanes(V x) {
  typedef int32_t Int __attribute__((vector_size(sizeof(V))));
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const V t = x < -87.0f ? V{} - 87.0f : x;  // NaN stays NaN
  const V shifted = t * 1.44269504088896341f + kRound, n = shifted - kRound;
  const V r = t - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  const V p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  Int bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits << 23) + (127 << 23);  // (n + 127) << 23
  V two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return x < -87.0f ? V{} : p * two_to_n;
}
PELAB_INLINE Float16 exp_nonpositive(Float16 x) { return exp_nonpositive_lanes(x); }
PELAB_INLINE Float8 exp_nonpositive(Float8 x) { return exp_nonpositive_lanes(x); }
PELAB_INLINE Float4 exp_nonpositive(Float4 x) { return exp_nonpositive_lanes(x); }

}  // namespace pelab::kernels
