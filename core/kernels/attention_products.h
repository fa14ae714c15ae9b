// The fused attention kernels' products, included by core/kernels/attention.cpp only: scratch
// strides, the register-tiled matrix products and their per-instruction-set tiles, in-register
// transposes, narrow products for head sizes 8 and 16, and the row softmax. Every helper is
// forced inline, so that each instruction set's copy of the entry points compiles its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/kernels/attention.h"
#include "core/kernels/vector_math.h"

namespace pelab::kernels {

// Internal linkage, as the helpers had in attention.cpp: this header is included by that one
// file only, and GCC then inlines and lays out the kernels exactly as it did.
namespace {

// Scratch rows, tables and bands are padded to multiples of 16 floats (one AVX-512 register,
// two AVX2 ones, four SSE ones); each instruction set's copy works on its own register width
// (Tile::Vector below).
constexpr int64_t kLanes = 16;
constexpr int64_t kLineFloats = 64 / sizeof(float);  // floats per cache line
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }
int64_t round_up_to_lanes(int64_t n) { return round_up(n, kLanes); }

// The row stride of blocks n floats wide that products walk down (a panel of a column's
// elements, or of a left factor's rows that a tile broadcasts from): n, or one 64-byte line
// more when n is a multiple of 128 floats. Rows 512 bytes apart fall into 8 of the L1
// cache's 64 sets, and 2 KB apart (T 512) into 2: a 32-row panel of k^T did not fit, and
// every tile reloaded it from the L2 cache. With an odd number of lines (or a multiple of
// 64 bytes that is not one of 512) a panel spreads over 16 sets or more.
int64_t spread_stride(int64_t n) { return n % (8 * kLineFloats) == 0 ? n + kLineFloats : n; }
// Scratch blocks n floats wide (k^T, v^T, q^T, dO^T, scores, their gradients, offset
// tables as columns): whole kLanes, spread.
int64_t scratch_stride(int64_t n) { return spread_stride(round_up_to_lanes(n)); }

// A read-only matrix: element (r, c) at data[r * row + c * column] (column = 1: row-major;
// row = 1: the transpose of a row-major matrix, read in place).
struct Matrix {
  const float* data;
  int64_t row, column = 1;
  PELAB_INLINE const float* at(int64_t r, int64_t c) const { return data + r * row + c * column; }
  Matrix transposed() const { return {data, column, row}; }
};

// y[r * ldy + c] += sum_p x(r, p) * m[p * ldm + c] for r < R, c < C * width(V): R rows of x
// times C vectors of m's columns, the sums in registers; each vector loaded from m feeds R
// FMAs. Strides may be negative (tables read in descending order). Overwrite: y = the sums
// (y is not read).
template <int R, int C, class V, bool Overwrite = false>
PELAB_INLINE void product_tile(int64_t depth, Matrix x, const float* __restrict m, int64_t ldm, float* __restrict y,
                               int64_t ldy) {
  constexpr int64_t kWidth = sizeof(V) / sizeof(float);
  V sums[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) sums[r][c] = Overwrite ? V{} : load<V>(y + r * ldy + c * kWidth);
  for (int64_t p = 0; p < depth; ++p) {
    V column[C];
    for (int c = 0; c < C; ++c) column[c] = load<V>(m + p * ldm + c * kWidth);
    for (int r = 0; r < R; ++r) {
      const float xr = *x.at(r, p);
      for (int c = 0; c < C; ++c) sums[r][c] += xr * column[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) store<V>(y + r * ldy + c * kWidth, sums[r][c]);
}

// A run of memory brought into the L2 cache a few lines at a time, interleaved with a
// product's tiles: the backward fetches the next block's saved probabilities (from memory)
// while it computes on the current one. Issued all at once, the prefetches would stall on
// the core's few outstanding-miss slots; a tile's FMAs hide a few lines each.
class PrefetchStream {
 public:
  PrefetchStream(const float* begin, int64_t n, int64_t lines_per_step)
      : next_(begin), end_(begin ? begin + n : nullptr), step_(lines_per_step * kLineFloats) {}
  PELAB_INLINE void step() {
    const float* stop = std::min(end_, next_ + step_);
    for (; next_ < stop; next_ += kLineFloats) __builtin_prefetch(next_, /*rw=*/0, /*locality=*/2);
  }

 private:
  const float *next_, *end_;
  int64_t step_;
};

// product_tile over all `rows` (R at a time, then one by one), for one block of columns;
// prefetch (if given) steps once per tile.
template <int R, int C, class V, bool Overwrite>
PELAB_INLINE void product_rows(int64_t rows, int64_t depth, Matrix x, const float* m, int64_t ldm, float* y,
                               int64_t ldy, PrefetchStream* prefetch) {
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    product_tile<R, C, V, Overwrite>(depth, {x.at(r, 0), x.row, x.column}, m, ldm, y + r * ldy, ldy);
    if (prefetch) prefetch->step();
  }
  for (; r < rows; ++r)
    product_tile<1, C, V, Overwrite>(depth, {x.at(r, 0), x.row, x.column}, m, ldm, y + r * ldy, ldy);
}

// Y (rows, n) += X (rows, depth) M (depth, n) (set_product: Y = X M), M and Y row-major with
// leading dimensions ldm, ldy: column blocks of C vectors V (the tile's width), then single
// vectors, then 8 columns (when V is wider) and single columns.
// The tile is R rows by C vectors: sized to the instruction set's registers (Tile below).
// Long products go kDepthBlock steps at a time, so that the panel of M every row tile reads
// (kDepthBlock x C vectors: 16 KB for AVX-512) stays in the L1 cache.
constexpr int64_t kDepthBlock = 128;
template <int R, int C, class V, bool Overwrite>
PELAB_INLINE void product_columns(int64_t rows, int64_t depth, Matrix x, const float* m, int64_t ldm, float* y,
                                  int64_t ldy, int64_t n, PrefetchStream* prefetch) {
  constexpr int64_t kWidth = kLanesOf<V>;
  int64_t c = 0;
  for (; c + C * kWidth <= n; c += C * kWidth)
    product_rows<R, C, V, Overwrite>(rows, depth, x, m + c, ldm, y + c, ldy, prefetch);
  for (; c + kWidth <= n; c += kWidth)
    product_rows<R, 1, V, Overwrite>(rows, depth, x, m + c, ldm, y + c, ldy, prefetch);
  if (kWidth > 8 && c + 8 <= n) {
    product_rows<R, 1, Float8, Overwrite>(rows, depth, x, m + c, ldm, y + c, ldy, prefetch);
    c += 8;
  }
  for (; c < n; ++c)
    for (int64_t r = 0; r < rows; ++r) {
      float sum = Overwrite ? 0.0f : y[r * ldy + c];
      for (int64_t p = 0; p < depth; ++p) sum += *x.at(r, p) * m[p * ldm + c];
      y[r * ldy + c] = sum;
    }
}
// With the tile T's rows, vectors and vector type.
template <class T>
PELAB_INLINE void add_product(int64_t rows, int64_t depth, Matrix x, const float* m, int64_t ldm, float* y, int64_t ldy,
                              int64_t n, PrefetchStream* prefetch = nullptr, int64_t first_step = 0) {
  for (int64_t p0 = first_step; p0 < depth; p0 += kDepthBlock)
    product_columns<T::R, T::C, typename T::Vector, /*Overwrite=*/false>(
        rows, std::min(kDepthBlock, depth - p0), {x.at(0, p0), x.row, x.column}, m + p0 * ldm, ldm, y, ldy, n, prefetch);
}
template <class T>
PELAB_INLINE void set_product(int64_t rows, int64_t depth, Matrix x, const float* m, int64_t ldm, float* y, int64_t ldy,
                              int64_t n) {
  const int64_t first = std::min(kDepthBlock, depth);  // the first depth block writes y (zeros if depth is 0)
  product_columns<T::R, T::C, typename T::Vector, /*Overwrite=*/true>(rows, first, x, m, ldm, y, ldy, n, nullptr);
  add_product<T>(rows, depth, x, m, ldm, y, ldy, n, nullptr, first);
}

// Rows and columns a tile covers, per instruction set, in vectors of the set's own register
// width (Vector: wider generic vectors live on the stack, see vector_math.h): 8 rows x 2
// Float16 = 16 of the 32 AVX-512 registers hold sums (enough independent FMA chains to hide
// their latency); AVX2 and SSE (16 registers each) take 4 rows x 2 Float8 and 4 x 2 Float4,
// 8 sums. Stores: the instruction set's streaming stores (vector_math.h), for the
// probabilities and the scores' gradient.
// NarrowDots: products only 8 or 16 columns wide (head sizes 8 and 16) go by narrow_product
// below (it keeps 16 Float16 sums and their operands in registers: AVX-512's 32 only).
template <int Rows, int Vectors, class StoreSet, bool NarrowDots, int BandRows>
struct Tile {
  static constexpr int R = Rows, C = Vectors;
  static constexpr int64_t kBandRows = BandRows;  // rows per band of a relative term (add_skewed_product)
  static constexpr bool kNarrowDots = NarrowDots;
  using Stores = StoreSet;
  using Vector = typename StoreSet::Vector;
  static constexpr int64_t kWidth = kLanesOf<Vector>;
  // The bands' vectors: N x N transposes of band rows need N <= kBandRows, and a band's
  // columns are rounded up to whole ones (Float8 when the bands are narrower than Vector)
  using BandVector = std::conditional_t<BandRows % kLanesOf<Vector> == 0, Vector, Float8>;
  static constexpr int64_t kBandWidth = kLanesOf<BandVector>;
};
using BaselineTile = Tile<4, 2, BaselineStores, false, 8>;
#ifdef PELAB_X86_DISPATCH
using Avx512Tile = Tile<8, 2, Avx512Stores, true, 8>;
using Avx2Tile = Tile<4, 2, Avx2Stores, false, 8>;
#endif

// The most rows per band of a relative term (Tile::kBandRows; see add_skewed_product).
constexpr int64_t kBlock = 16;

// An N x N block (N = V's lanes: 16, 8 or 4) transposed in registers: rows[i] holds row i,
// and on return column i. log2 N butterfly stages of two-source shuffles (vpermt2ps on
// AVX-512); stage K swaps bit K of the row and column indices.
template <int K, class V, int... J>
PELAB_INLINE void butterfly(V& a, V& b, std::integer_sequence<int, J...>) {
  constexpr int N = sizeof...(J);
  const V low = __builtin_shufflevector(a, b, (((J >> K) & 1) ? N + (J ^ (1 << K)) : J)...);
  const V high = __builtin_shufflevector(a, b, (((J >> K) & 1) ? N + J : (J | (1 << K)))...);
  a = low;
  b = high;
}
template <int K, class V>
PELAB_INLINE void butterfly_stage(V (&rows)[kLanesOf<V>]) {
  constexpr int N = kLanesOf<V>;
  for (int i = 0; i < N; ++i)
    if (!(i & (1 << K))) butterfly<K>(rows[i], rows[i | (1 << K)], std::make_integer_sequence<int, N>());
}
template <class V>
PELAB_INLINE void transpose_square(V (&rows)[kLanesOf<V>]) {
  butterfly_stage<0>(rows);
  butterfly_stage<1>(rows);
  if constexpr (kLanesOf<V> >= 8) butterfly_stage<2>(rows);
  if constexpr (kLanesOf<V> >= 16) butterfly_stage<3>(rows);
}

// Lanes [0, n) of a vector from or to p (the rest of a load 0): whole vectors for n >= its
// lanes and, for Float16, n = 8.
template <class V>
PELAB_INLINE V load_prefix(const float* p, int64_t n) {
  if (n >= kLanesOf<V>) return load<V>(p);
  if constexpr (kLanesOf<V> == 16)
    if (n == 8)
      return __builtin_shufflevector(load<Float8>(p), Float8{}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  V v = {};
  for (int64_t i = 0; i < n; ++i) v[i] = p[i];
  return v;
}
template <class V>
PELAB_INLINE void store_prefix(float* p, V v, int64_t n) {
  if (n >= kLanesOf<V>) return store(p, v);
  if constexpr (kLanesOf<V> == 16)
    if (n == 8) return store(p, Float8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)));
  for (int64_t i = 0; i < n; ++i) p[i] = v[i];
}

// dst (cols, rows) = factor src (rows, cols)^T, leading dimensions lds, ldd (with
// Accumulate: dst += factor src^T): N x N blocks of V's lanes (partial at the edges)
// through transpose_square, so that each block is N row loads and N stores, not N^2 of
// each (k^T, q^T, v^T and dO^T per pair; dV and dK back at the end).
template <class V, bool Accumulate = false>
PELAB_INLINE void transpose(int64_t rows, int64_t cols, const float* __restrict src, int64_t lds,
                            float* __restrict dst, int64_t ldd, float factor = 1.0f) {
  constexpr int64_t N = kLanesOf<V>;
  for (int64_t r0 = 0; r0 < rows; r0 += N) {
    const int64_t height = std::min(N, rows - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += N) {
      const int64_t width = std::min(N, cols - c0);
      V block[N];
      for (int64_t r = 0; r < N; ++r) block[r] = r < height ? load_prefix<V>(src + (r0 + r) * lds + c0, width) : V{};
      transpose_square(block);
      for (int64_t c = 0; c < width; ++c) {
        float* d = dst + (c0 + c) * ldd + r0;
        const V column = factor * block[c];
        store_prefix(d, Accumulate ? load_prefix<V>(d, height) + column : column, height);
      }
    }
  }
}

// Rows of a (B, H, rows, Dh) view copied into a contiguous (rows, Dh) block.
PELAB_INLINE void gather_rows(const Strided& s, int64_t b, int64_t h, int64_t rows, int64_t d, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = s.at(b, h, r);
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = src[c];
  }
}

// Row r of a (B, H, rows, Dh) view copied into column r of a (Dh, ld) block, times
// `factor`: k^T, v^T; q^T and dO^T as the left factors of products (a tile's rows of a
// column-major left factor are one run of memory, so that its broadcasts need one pointer,
// not one register per row, which GCC spilled to the stack).
template <class V>
PELAB_INLINE void transpose_rows(const Strided& s, int64_t b, int64_t h, int64_t rows, int64_t d, float* t, int64_t ld,
                                 float factor = 1.0f) {
  transpose<V>(rows, d, s.at(b, h, 0), s.row, t, ld, factor);
}

// sum_j x[j] and sum_j x[j] y[j] for j < n, in vectors V (four independent chains of
// vector adds or FMAs, not one).
template <class V>
PELAB_INLINE float sum_of(const float* x, int64_t n) {
  constexpr int64_t N = kLanesOf<V>;
  V sums[4] = {};
  int64_t j = 0;
  for (; j + 4 * N <= n; j += 4 * N)
    for (int c = 0; c < 4; ++c) sums[c] += load<V>(x + j + c * N);
  for (; j + N <= n; j += N) sums[0] += load<V>(x + j);
  const V total = (sums[0] + sums[1]) + (sums[2] + sums[3]);
  float sum = horizontal_sum(total);
  for (; j < n; ++j) sum += x[j];
  return sum;
}
template <class V>
PELAB_INLINE float dot(const float* x, const float* y, int64_t n) {
  constexpr int64_t N = kLanesOf<V>;
  V sums[4] = {};
  int64_t j = 0;
  for (; j + 4 * N <= n; j += 4 * N)
    for (int c = 0; c < 4; ++c) sums[c] += load<V>(x + j + c * N) * load<V>(y + j + c * N);
  for (; j + N <= n; j += N) sums[0] += load<V>(x + j) * load<V>(y + j);
  const V total = (sums[0] + sums[1]) + (sums[2] + sums[3]);
  float sum = horizontal_sum(total);
  for (; j < n; ++j) sum += x[j] * y[j];
  return sum;
}

// The sums of 16 vectors' lanes: lane k of the result is the sum of sums[k]'s lanes. Four
// stages of two-source shuffles and adds (15 adds, 30 shuffles; a transpose and a sum would
// take 64 and 15): stage `Width` pairs sums[i] with sums[i + n] and adds their halves of
// width lanes, leaving n vectors whose blocks of `Width` lanes are partial sums.
template <int Width, int... L>
PELAB_INLINE Float16 fold_pair(Float16 a, Float16 b, std::integer_sequence<int, L...>) {
  // output lane L: block L / Width of width lanes, from a (even blocks) or b (odd ones)
  const Float16 low = __builtin_shufflevector(
      a, b, ((L / Width) % 2 ? 16 : 0) + (L / Width / 2) * 2 * Width + L % Width...);
  const Float16 high = __builtin_shufflevector(
      a, b, ((L / Width) % 2 ? 16 : 0) + (L / Width / 2) * 2 * Width + L % Width + Width...);
  return low + high;
}
PELAB_INLINE Float16 lane_sums(Float16 (&sums)[kLanes]) {
  const auto lanes = std::make_integer_sequence<int, kLanes>();
  for (int i = 0; i < 8; ++i) sums[i] = fold_pair<8>(sums[i], sums[i + 8], lanes);
  for (int i = 0; i < 4; ++i) sums[i] = fold_pair<4>(sums[i], sums[i + 4], lanes);
  for (int i = 0; i < 2; ++i) sums[i] = fold_pair<2>(sums[i], sums[i + 2], lanes);
  return fold_pair<1>(sums[0], sums[1], lanes);
}

// Rows [0, rows) of a (B, H, rows, N) view in kLanes-row panels, zero padded to a whole
// panel: panel p holds N runs of kLanes floats, run c the rows' column c
// (packed[p * N * kLanes + c * kLanes + lane] = row p * kLanes + lane, column c): the right
// factor of narrow_product, each panel's N vectors at fixed offsets from one pointer.
PELAB_INLINE void pack_column_panels(const Strided& s, int64_t b, int64_t h, int64_t rows, int64_t N, float* packed) {
  for (int64_t r0 = 0; r0 < rows; r0 += kLanes) {
    const int64_t height = std::min(kLanes, rows - r0);
    float* panel = packed + r0 * N;  // (N, kLanes)
    if (height < kLanes) std::fill(panel, panel + N * kLanes, 0.0f);
    transpose<Float16>(height, N, s.at(b, h, r0), s.row, panel, kLanes);
  }
}

// y[r * ldy + c] = (Accumulate: y[...] +) sum_p x[r * ldx + p] m(p, c) for r < rows, c < N
// (8 or 16), m in column panels (pack_column_panels): a product whose output is narrower
// than a vector (p v and dS k at head sizes 8 and 16), as dot products along x's rows:
// lanes along p, 16 / N rows times N columns of sums, reduced at the end by lane_sums.
// depth: a multiple of kLanes (x's rows zero padded up to it). As a product_tile, the left
// factor's 8 row-major rows took 8 pointers, which GCC spilled to the stack.
template <int N, bool Accumulate>
PELAB_INLINE void narrow_product(int64_t rows, int64_t depth, const float* __restrict x, int64_t ldx,
                                 const float* __restrict panels, float* __restrict y, int64_t ldy) {
  static_assert(kLanes % N == 0, "N must divide the vector width");
  constexpr int kRows = kLanes / N;
  auto emit = [&](int64_t r, int64_t c, float sum) {
    float& out = y[r * ldy + c];
    out = Accumulate ? out + sum : sum;
  };
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    Float16 sums[kLanes] = {};  // sums[i * N + c]: row r + i, column c
    for (int64_t p = 0; p < depth; p += kLanes) {
      const float* panel = panels + p * N;
      for (int i = 0; i < kRows; ++i) {
        const Float16 row = load<Float16>(x + (r + i) * ldx + p);
        for (int c = 0; c < N; ++c) sums[i * N + c] += row * load<Float16>(panel + c * kLanes);
      }
    }
    const Float16 total = lane_sums(sums);
    for (int i = 0; i < kRows; ++i)
      for (int c = 0; c < N; ++c) emit(r + i, c, total[i * N + c]);
  }
  for (; r < rows; ++r)
    for (int c = 0; c < N; ++c) {
      float sum = 0.0f;
      for (int64_t p = 0; p < depth; ++p) sum += x[r * ldx + p] * panels[(p / kLanes) * N * kLanes + c * kLanes + p % kLanes];
      emit(r, c, sum);
    }
}

// Whether the products Dh columns wide go by narrow_product (on tiles with kNarrowDots),
// and that product for N = Dh.
constexpr bool narrow_head_dim(int64_t Dh) { return Dh == 8 || Dh == 16; }
template <bool Accumulate>
PELAB_INLINE void narrow_product_of_width(int64_t Dh, int64_t rows, int64_t depth, const float* x, int64_t ldx,
                                          const float* panels, float* y, int64_t ldy) {
  if (Dh == 8)
    narrow_product<8, Accumulate>(rows, depth, x, ldx, panels, y, ldy);
  else
    narrow_product<16, Accumulate>(rows, depth, x, ldx, panels, y, ldy);
}

// One row's attention dropout (core/kernels/attention_dropout.h): the seed of its decisions,
// the threshold and 1 / (1 - p).
struct RowDropout {
  uint32_t seed, threshold;
  float keep_scale;
};

// 32-bit unsigned lanes as many as V's: the dropout hash's.
template <class V>
struct UnsignedLanesOf {
  typedef uint32_t Type __attribute__((vector_size(sizeof(V))));
};

// Negates the dropped ones of row[0, n) (non-negative exps): the probabilities copied from
// the row then carry the decisions in their sign bits (dropped: negative or -0), which the
// backward reads (restore_dropout).
template <class T>
PELAB_INLINE void mark_dropped(float* __restrict row, int64_t n, const RowDropout& drop) {
  using V = typename T::Vector;
  using U = typename UnsignedLanesOf<V>::Type;
  constexpr int64_t N = T::kWidth;
  U column;
  for (int64_t l = 0; l < N; ++l) column[l] = static_cast<uint32_t>(l);
  const U threshold = U{} + drop.threshold, step = U{} + static_cast<uint32_t>(N);
  int64_t j = 0;
  for (; j + N <= n; j += N, column += step) {
    const V e = load<V>(row + j);
    store(row + j, dropout_hash(drop.seed, column) >= threshold ? e : -e);
  }
  for (; j < n; ++j)
    if (dropout_hash(drop.seed, static_cast<uint32_t>(j)) < drop.threshold) row[j] = -row[j];
}

// row[0, np) after mark_dropped and the copy: the kept exps times 1 / (1 - p), the dropped
// ones 0 (what p v multiplies).
template <class T>
PELAB_INLINE void scale_kept(float* __restrict row, int64_t np, float keep_scale) {
  using V = typename T::Vector;
  constexpr int64_t N = T::kWidth;
  for (int64_t j = 0; j < np; j += N) {
    const V x = load<V>(row + j);
    store(row + j, x > V{} ? x * keep_scale : V{});
  }
}

// The backward's view of a block of saved probabilities with dropout (mark_dropped's signs):
// plain[i, j] = |saved| (P, for dS), attended[i, j] = P / (1 - p) where kept, else 0 (for
// dV and the value rows' gradient), and grad[i, j] (dA = dO (v + Rv)^T on entry) becomes
// dP = dA / (1 - p) where kept, else 0. n columns of `rows` rows; plain and attended have
// rows ld apart, zero from n to np.
template <class T>
PELAB_INLINE void restore_dropout(int64_t rows, int64_t n, int64_t np, const float* __restrict saved, int64_t ld_saved,
                                  float keep_scale, float* __restrict grad, float* __restrict plain,
                                  float* __restrict attended, int64_t ld) {
  using V = typename T::Vector;
  constexpr int64_t N = T::kWidth;
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = saved + i * ld_saved;
    float *g = grad + i * ld, *p = plain + i * ld, *a = attended + i * ld;
    int64_t j = 0;
    for (; j + N <= n; j += N) {
      const V x = load<V>(s + j), dA = load<V>(g + j);
      store(p + j, x < V{} ? -x : x);
      store(a + j, x > V{} ? x * keep_scale : V{});
      store(g + j, x > V{} ? dA * keep_scale : V{});
    }
    for (; j < n; ++j) {
      p[j] = std::fabs(s[j]);
      a[j] = s[j] > 0 ? s[j] * keep_scale : 0.0f;
      g[j] = s[j] > 0 ? g[j] * keep_scale : 0.0f;
    }
    std::fill(p + n, p + np, 0.0f);
    std::fill(a + n, a + np, 0.0f);
  }
}

// The softmax of row[0, n) + bias[0, n) + mask[0, n) (either may be null): row becomes the
// unnormalized exp(x - max x) (padded to np, a multiple of kLanes, with zeros), probs[0, n)
// the probabilities (by streaming stores: read back only by the backward); returns 1 / the
// sum, by which the caller scales what it computes from row (the rows of p v: Dh floats,
// not a third pass over Tk). Passes: the sum with bias and mask and the maximum; exp and its
// sum; the scaled copy. With dropout (drop not null), the saved probabilities carry the
// decisions in their signs and row the dropped and rescaled exps (mark_dropped, scale_kept).
template <class T>
PELAB_INLINE float softmax_padded(float* __restrict row, const float* __restrict bias, const float* __restrict mask,
                                  int64_t n, int64_t np, float* __restrict probs, const RowDropout* drop = nullptr) {
  using V = typename T::Vector;
  constexpr int64_t N = T::kWidth;
  if (bias && mask)
    for (int64_t j = 0; j < n; ++j) row[j] += bias[j] + mask[j];
  else if (bias || mask)
    for (int64_t j = 0; j < n; ++j) row[j] += (bias ? bias : mask)[j];
  std::fill(row + n, row + np, kNegativeInfinity);
  V lane_max[4];
  for (auto& m : lane_max) m = V{} + kNegativeInfinity;
  int64_t j0 = 0;
  for (; j0 + 4 * N <= np; j0 += 4 * N)  // four independent chains
    for (int c = 0; c < 4; ++c) {
      const V x = load<V>(row + j0 + c * N);
      lane_max[c] = x > lane_max[c] ? x : lane_max[c];
    }
  for (; j0 < np; j0 += N) {
    const V x = load<V>(row + j0);
    lane_max[0] = x > lane_max[0] ? x : lane_max[0];
  }
  V lanes = lane_max[0] > lane_max[1] ? lane_max[0] : lane_max[1];
  const V other = lane_max[2] > lane_max[3] ? lane_max[2] : lane_max[3];
  lanes = lanes > other ? lanes : other;
  const V maximum = V{} + horizontal_max(lanes);
  V sum = {}, other_sum = {};  // two chains
  int64_t j = 0;
  for (; j + 2 * N <= np; j += 2 * N) {
    const V e = exp_nonpositive(load<V>(row + j) - maximum), f = exp_nonpositive(load<V>(row + j + N) - maximum);
    store(row + j, e);
    store(row + j + N, f);
    sum += e;
    other_sum += f;
  }
  if (j < np) {
    const V e = exp_nonpositive(load<V>(row + j) - maximum);
    store(row + j, e);
    sum += e;
  }
  const float inverse = 1.0f / horizontal_sum(sum + other_sum);
  if (drop) mark_dropped<T>(row, n, *drop);
  copy_streaming<typename T::Stores>(row, probs, n, inverse);
  if (drop) scale_kept<T>(row, np, drop->keep_scale);
  return inverse;
}

}  // namespace

}  // namespace pelab::kernels
