#include "core/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/kernels/instruction_sets.h"
#include "core/kernels/vector_math.h"

// The work is small matrix products (scores = q k^T, p v, and their gradients) done by one
// register-tiled loop (product_tile: a few rows times two vectors of columns, so that each
// load of the right-hand matrix feeds several FMAs), plus row-wise softmax; the relative
// terms are the same products on bands of an offset table, shifted into place. Every loop
// is written so that GCC vectorizes it (GCC vector extensions, no reductions across lanes). The entry points are compiled
// once per instruction set (AVX-512, AVX2 + FMA, baseline) and picked by what the CPU
// supports (by feature, not by CPU model: target_clones("arch=...") matches models only;
// core/kernels/instruction_sets.h); the helpers are forced inline so that each copy is
// compiled for its instruction set, and templated on the copy's vector type (Tile::Vector:
// Float16, Float8 or Float4), since a vector wider than the copy's registers lives on the
// stack (vector_math.h).

namespace pelab::kernels {

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

// The softmax of row[0, n) + bias[0, n) + mask[0, n) (either may be null): row becomes the
// unnormalized exp(x - max x) (padded to np, a multiple of kLanes, with zeros), probs[0, n)
// the probabilities (by streaming stores: read back only by the backward); returns 1 / the
// sum, by which the caller scales what it computes from row (the rows of p v: Dh floats,
// not a third pass over Tk). Passes: the sum with bias and mask and the maximum; exp and its
// sum; the scaled copy.
template <class T>
PELAB_INLINE float softmax_padded(float* __restrict row, const float* __restrict bias, const float* __restrict mask,
                                  int64_t n, int64_t np, float* __restrict probs) {
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
  copy_streaming<typename T::Stores>(row, probs, n, inverse);
  return inverse;
}

// Clipped tables (AttentionInputs::clip = c > 0): query i meets table row c - clamp(i - j,
// -c, c) at key j (descending: row 0 is offset c and every farther past key, row 2c offset
// -c and every farther future key). The keys [0, width) split into the far past (row 0),
// the 2c - 1 near keys (one row each) and the far future (row 2c).
struct ClippedRanges {
  int64_t near_begin, near_end;
  ClippedRanges(int64_t c, int64_t i, int64_t width)
      : near_begin(std::clamp<int64_t>(i - c + 1, 0, width)),
        near_end(std::clamp<int64_t>(i + c, near_begin, width)) {}
};

// row[j] += u[row of (i, j)] for j < width: u (2c + 1) the products of query i with the rows.
PELAB_INLINE void spread_clipped(const float* __restrict u, int64_t c, int64_t i, float* __restrict row,
                                 int64_t width) {
  const ClippedRanges ranges(c, i, width);
  const float past = u[0], future = u[2 * c];
  for (int64_t j = 0; j < ranges.near_begin; ++j) row[j] += past;
  for (int64_t j = ranges.near_begin; j < ranges.near_end; ++j) row[j] += u[c - i + j];
  for (int64_t j = ranges.near_end; j < width; ++j) row[j] += future;
}

// m[r] = sum of w[j] over the keys j < width that meet row r (2c + 1 sums): the transpose of
// spread_clipped (weights per table row, for products with the rows); sums in vectors V.
template <class V>
PELAB_INLINE void collect_clipped(const float* __restrict w, int64_t c, int64_t i, float* __restrict m,
                                  int64_t width) {
  const ClippedRanges ranges(c, i, width);
  std::fill(m, m + 2 * c + 1, 0.0f);
  for (int64_t j = ranges.near_begin; j < ranges.near_end; ++j) m[c - i + j] = w[j];
  m[0] += sum_of<V>(w, ranges.near_begin);
  m[2 * c] += sum_of<V>(w + ranges.near_end, width - ranges.near_end);
}

// Every row of w (rows, width), row-major, the rows of queries first_query, first_query +
// 1, ..., collected per clipped table row: (rows, 2c + 1) into `collected`.
template <class V>
PELAB_INLINE const float* collect_clipped_rows(int64_t rows, int64_t width, Matrix w, int64_t c, int64_t first_query,
                                               std::vector<float>& collected) {
  collected.resize(std::max<size_t>(collected.size(), rows * (2 * c + 1)));
  for (int64_t r = 0; r < rows; ++r)
    collect_clipped<V>(w.at(r, 0), c, first_query + r, collected.data() + r * (2 * c + 1), width);
  return collected.data();
}

// The relative terms, for rows r (queries i, or keys j in key-major order) that meet table
// row first0 - r + n at column n (for the block of queries i0, i0 + 1, ...: first0 =
// T - 1 - i0 for a descending table met by queries, row T - 1 - i + j = offset i - j;
// first0 = T - 1 + i0 for an ascending one met by keys, row T - 1 - j + i). Rows are taken
// Tile::kBandRows at a time: a block [r0, r0 + b) meets the b + n - 1 table rows from
// base = first0 - (r0 + b - 1) on, so each term is one product over that band plus a shift
// (the Transformer-XL relative shift, done by addressing). With clip c > 0 (query-major
// terms only, out and w row-major; row r is query first_query + r, key n) the table has
// the 2c + 1 clipped rows instead, and each term is a product with those rows, spread over
// (or collected from) the score rows. With runs (tables given by runs,
// AttentionInputs::runs) table row p above is row runs->row[p] of the table of runs: a band
// is a product with its runs, spread over (or collected from) its positions.
struct RunMap;
struct Skew {
  int64_t first0;
  int64_t clip = 0, first_query = 0;
  const RunMap* runs = nullptr;
};

// The columns per row of an offset table of `rows` rows laid out as columns (OffsetColumns),
// and the band positions a run map covers: a band reaches past the last row by up to
// kBlock + 2 kLanes columns (add_skewed_product); whole cache lines, spread over the L1
// sets (spread_stride: unspread, the 2T + 63 columns made rows of about 4 KB at T 476-484,
// whose panels fell onto a few L1 sets).
int64_t offset_columns_ld(int64_t rows) { return scratch_stride(rows + kBlock + 3 * kLanes); }

// The table row of each band position (Skew::runs) when the tables are given by runs
// (AttentionInputs::runs), continued past the last offset in steps of one (a band reaches
// into OffsetColumns' zero padding); [single_begin, single_end): the longest stretch of
// positions that are runs of one (DeBERTa's exact distances), whose weights need no
// collecting per run.
struct RunMap {
  std::vector<int32_t> row;
  int64_t single_begin = 0, single_end = 0;
};
// For descending tables (the query and value terms) and ascending ones (the key term, read
// from the last row backwards); null without runs.
class RunMaps {
 public:
  RunMaps(const AttentionInputs& in, int64_t W) {
    if (!in.runs) return;
    const int64_t length = offset_columns_ld(W);
    const int32_t last = static_cast<int32_t>(in.run_count - 1);
    descending_.row.resize(length);
    ascending_.row.resize(length);
    for (int64_t p = 0; p < length; ++p) {
      const int32_t past_the_end = static_cast<int32_t>(last + 1 + (p - W));
      descending_.row[p] = p < W ? in.runs[p] : past_the_end;
      ascending_.row[p] = p < W ? last - in.runs[W - 1 - p] : past_the_end;
    }
    find_singles(descending_);
    find_singles(ascending_);
  }
  const RunMap* descending() const { return descending_.row.empty() ? nullptr : &descending_; }
  const RunMap* ascending() const { return ascending_.row.empty() ? nullptr : &ascending_; }

 private:
  static void find_singles(RunMap& map) {
    const auto& row = map.row;
    const int64_t n = static_cast<int64_t>(row.size());
    auto single = [&](int64_t p) { return (p == 0 || row[p - 1] != row[p]) && (p + 1 == n || row[p + 1] != row[p]); };
    for (int64_t p = 0; p < n;) {
      if (!single(p)) {
        ++p;
        continue;
      }
      int64_t end = p + 1;
      while (end < n && single(end)) ++end;
      if (end - p > map.single_end - map.single_begin) map.single_begin = p, map.single_end = end;
      p = end;
    }
  }
  RunMap descending_, ascending_;
};

// Scratch of the relative terms: a band of products (or a skewed block of weights) and its
// per-run products (or sums).
struct RelativeScratch {
  std::vector<float> band, per_run;
};

// out[r * ldo + n] = per_run[r * ldp + run_of[n] - run_of[0]] for r < rows, n < width (a
// multiple of V's lanes): a band's products with its runs spread over its positions. Runs
// step by 0 or 1, so the N positions n0 .. n0 + N - 1 take their values from the N runs
// from run_of[n0] on: one vector load, permuted (per_run's rows are read up to a vector
// past their last run).
template <class V>
PELAB_INLINE void expand_runs(int64_t rows, int64_t width, const int32_t* run_of, const float* per_run, int64_t ldp,
                              float* out, int64_t ldo) {
  constexpr int64_t N = kLanesOf<V>;
  for (int64_t n0 = 0; n0 < width; n0 += N) {
    LaneIndices<V> index;
    std::memcpy(&index, run_of + n0, sizeof index);
    const int32_t first = run_of[n0];
    index -= first;
    const float* from = per_run + (first - run_of[0]);
    for (int64_t r = 0; r < rows; ++r) store<V>(out + r * ldo + n0, permute(load<V>(from + r * ldp), index));
  }
}

// sums[(run_of[n] - run_of[0]) * rows + r] = the sum of cells[r * ldc + n] over each run's
// positions n < depth (run-major: a run's sums for N rows are one vector): a block of
// weights collected per run (the transpose of expand_runs), N x N blocks transposed in
// registers and added per run.
template <class V>
PELAB_INLINE const float* collect_runs(int64_t rows, int64_t depth, const float* cells, int64_t ldc,
                                       const int32_t* run_of, std::vector<float>& sums) {
  constexpr int64_t N = kLanesOf<V>;
  const int32_t first = run_of[0];
  sums.assign((run_of[depth - 1] - first + 1) * rows, 0.0f);
  float* s = sums.data();
  int64_t n0 = 0;
  if (rows % N == 0)
    for (; n0 + N <= depth; n0 += N)
      for (int64_t rs = 0; rs < rows; rs += N) {
        V block[N];  // row r: cells of row rs + r at positions n0 .. n0 + N - 1
        for (int64_t r = 0; r < N; ++r) block[r] = load<V>(cells + (rs + r) * ldc + n0);
        transpose_square(block);
        for (int64_t n = 0; n < N; ++n) {
          float* run_sums = s + (run_of[n0 + n] - first) * rows + rs;
          store<V>(run_sums, load<V>(run_sums) + block[n]);
        }
      }
  for (int64_t n = n0; n < depth; ++n)
    for (int64_t r = 0; r < rows; ++r) s[(run_of[n] - first) * rows + r] += cells[r * ldc + n];
  return s;
}

// out[r * out_row + n * out_column] += sum_d x(r, d) columns[d * ldc + first0 - r + n] for
// r < rows, n < width: x times a table laid out as columns (OffsetColumns); out may be
// transposed (out_row = 1: the key term, computed key-major, lands in (query, key) scores).
template <class T>
PELAB_INLINE void add_skewed_product(int64_t rows, int64_t depth, Matrix x, const float* columns, int64_t ldc,
                                     Skew skew, float* out, int64_t out_row, int64_t out_column, int64_t width,
                                     RelativeScratch& scratch) {
  std::vector<float>& band = scratch.band;
  if (skew.clip > 0) {  // the products with the 2c + 1 rows, spread over each row of out
    const int64_t clip = skew.clip, clipped_rows = 2 * clip + 1;
    band.resize(std::max<size_t>(band.size(), rows * clipped_rows));
    set_product<T>(rows, depth, x, columns, ldc, band.data(), clipped_rows, clipped_rows);
    for (int64_t r = 0; r < rows; ++r)
      spread_clipped(band.data() + r * clipped_rows, clip, skew.first_query + r, out + r * out_row, width);
    return;
  }
  static_assert(T::kBandRows <= kBlock && T::kBandRows % T::kBandWidth == 0, "bands: whole N x N blocks, at most kBlock");
  for (int64_t r0 = 0; r0 < rows; r0 += T::kBandRows) {
    const int64_t b = std::min(T::kBandRows, rows - r0), base = skew.first0 - (r0 + b - 1),
                  band_width = round_up(width + b - 1, T::kBandWidth);
    band.resize(std::max<size_t>(band.size(), b * band_width));
    if (!skew.runs) {
      set_product<T>(b, depth, {x.at(r0, 0), x.row, x.column}, columns + base, ldc, band.data(), band_width,
                     band_width);
    } else {  // the products with the band's runs, spread over its positions
      const int32_t* run_of = skew.runs->row.data() + base;
      const int64_t runs = run_of[band_width - 1] - run_of[0] + 1,
                    runs_width = round_up(runs, T::kBandWidth), ldp = runs_width + T::kBandWidth;
      scratch.per_run.resize(std::max<size_t>(scratch.per_run.size(), b * ldp));
      set_product<T>(b, depth, {x.at(r0, 0), x.row, x.column}, columns + run_of[0], ldc, scratch.per_run.data(), ldp,
                     runs_width);
      expand_runs<typename T::BandVector>(b, band_width, run_of, scratch.per_run.data(), ldp, band.data(), band_width);
    }
    if (out_column == 1) {
      for (int64_t r = 0; r < b; ++r) {
        const float* shifted = band.data() + r * band_width + (b - 1 - r);
        float* o = out + (r0 + r) * out_row;
        for (int64_t n = 0; n < width; ++n) o[n] += shifted[n];
      }
    } else {  // a column of the output at a time: its b rows are one run of memory when out_row = 1
      using V = typename T::BandVector;
      constexpr int64_t N = T::kBandWidth;
      int64_t n0 = 0;
      if (b == T::kBandRows && out_row == 1)  // N x N blocks: the shifted band rows, transposed in registers
        for (; n0 + N <= width; n0 += N)
          for (int64_t rs = 0; rs < b; rs += N) {  // band rows rs .. rs + N - 1
            V block[N];
            for (int64_t r = 0; r < N; ++r)
              block[r] = load<V>(band.data() + (rs + r) * band_width + (b - 1 - rs - r) + n0);
            transpose_square(block);
            for (int64_t n = 0; n < N; ++n) {
              float* o = out + r0 + rs + (n0 + n) * out_column;
              store<V>(o, load<V>(o) + block[n]);
            }
          }
      for (int64_t n = n0; n < width; ++n)
        for (int64_t r = 0; r < b; ++r)
          out[(r0 + r) * out_row + n * out_column] += band[r * band_width + (b - 1 - r) + n];
    }
  }
}

// The weights w(r0 + r, n) (r < b, n < width) laid into their (row, table row) cells of a
// zeroed (b, depth = width + b - 1) block: mass[r * depth + (b - 1 - r) + n], the skew of
// add_skewed_product undone. Query-major weights (w.column = 1) are row copies; key-major
// ones (w.row = 1: dS^T) are read N x N at a time (N: V's lanes) and transposed in registers.
template <class V>
PELAB_INLINE float* skewed_mass(int64_t r0, int64_t b, int64_t width, Matrix w, std::vector<float>& mass) {
  const int64_t depth = width + b - 1;
  mass.resize(std::max<size_t>(mass.size(), b * depth));
  std::memset(mass.data(), 0, sizeof(float) * b * depth);
  float* m = mass.data();
  if (w.column == 1) {
    for (int64_t r = 0; r < b; ++r) std::memcpy(m + r * depth + (b - 1 - r), w.at(r0 + r, 0), sizeof(float) * width);
    return m;
  }
  constexpr int64_t N = kLanesOf<V>;
  int64_t n0 = 0;
  if (b % N == 0 && w.row == 1)
    for (; n0 + N <= width; n0 += N)
      for (int64_t rs = 0; rs < b; rs += N) {
        V block[N];  // row n: w(r0 + rs .. r0 + rs + N - 1, n0 + n)
        for (int64_t n = 0; n < N; ++n) block[n] = load<V>(w.at(r0 + rs, n0 + n));
        transpose_square(block);
        for (int64_t r = 0; r < N; ++r) store<V>(m + (rs + r) * depth + (b - 1 - rs - r) + n0, block[r]);
      }
  for (int64_t n = n0; n < width; ++n)
    for (int64_t r = 0; r < b; ++r) m[r * depth + (b - 1 - r) + n] = *w.at(r0 + r, n);
  return m;
}

// The two products of weights w(r, n) (r < rows, n < width) with a skewed table, from one
// skewed (or clipped) copy of w per block of rows (a term's backward needs both, and
// building the copy is a pass over w):
//   rows:  out[r * ldo + (0, Dh)] += sum_n w(r, n) table[(first0 - r + n) * stride + (0, Dh)]
//          (weights times table rows; the value term's forward, dQ' and dK's relative parts)
//   outer: grad_table[(first0 - r + n) * stride + (0, Dh)] += w(r, n) x[r * ldx + (0, Dh)]
//          (a table's gradient from add_skewed_product's or the rows product's other factor)
// Either is skipped when its output is null; stride < 0 reads and writes in descending order.
struct SkewedRows {
  const float* table;
  float* out;
  int64_t ldo;
};
struct SkewedOuter {
  const float* x;
  int64_t ldx;
  float* grad_table;
};
// add_skewed_weighted's two products for the b rows from r0 on, with weights (row, table
// row) on the table rows first_row, first_row + 1, ... (transposed for the outer product).
template <class T>
PELAB_INLINE void weighted_products(int64_t b, Matrix weights, int64_t first_row, int64_t rows_met, int64_t r0,
                                    int64_t stride, int64_t Dh, const SkewedRows& weighted_rows,
                                    const SkewedOuter& outer) {
  if (weighted_rows.out)
    add_product<T>(b, rows_met, weights, weighted_rows.table + first_row * stride, stride,
                   weighted_rows.out + r0 * weighted_rows.ldo, weighted_rows.ldo, Dh);
  if (outer.grad_table)
    add_product<T>(rows_met, b, weights.transposed(), outer.x + r0 * outer.ldx, outer.ldx,
                   outer.grad_table + first_row * stride, stride, Dh);
}

template <class T>
PELAB_INLINE void add_skewed_weighted(int64_t rows, int64_t width, Matrix w, int64_t stride, Skew skew, int64_t Dh,
                                      SkewedRows weighted_rows, SkewedOuter outer, RelativeScratch& scratch) {
  std::vector<float>& mass = scratch.band;
  if (skew.clip > 0) {  // w collected per table row: times the 2c + 1 rows, and transposed times x
    const int64_t clipped_rows = 2 * skew.clip + 1;
    const float* collected =
        collect_clipped_rows<typename T::Vector>(rows, width, w, skew.clip, skew.first_query, mass);
    if (weighted_rows.out)
      add_product<T>(rows, clipped_rows, {collected, clipped_rows}, weighted_rows.table, stride,
                              weighted_rows.out, weighted_rows.ldo, Dh);
    if (outer.grad_table)
      add_product<T>(clipped_rows, rows, Matrix{collected, clipped_rows}.transposed(), outer.x, outer.ldx,
                              outer.grad_table, stride, Dh);
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += T::kBandRows) {
    const int64_t b = std::min(T::kBandRows, rows - r0), base = skew.first0 - (r0 + b - 1), depth = width + b - 1;
    const float* cells = skewed_mass<typename T::BandVector>(r0, b, width, w, mass);  // (b, depth)
    if (!skew.runs) {
      weighted_products<T>(b, {cells, depth}, base, depth, r0, stride, Dh, weighted_rows, outer);
      continue;
    }
    // Runs: positions [begin, end) of the band that are runs of one meet one table row each
    // (the weights as they are); those before and after are summed per run first
    const int32_t* run_of = skew.runs->row.data() + base;
    const int64_t begin = std::clamp<int64_t>(skew.runs->single_begin - base, 0, depth),
                  end = std::clamp<int64_t>(skew.runs->single_end - base, begin, depth);
    if (end > begin) weighted_products<T>(b, {cells + begin, depth}, run_of[begin], end - begin, r0, stride, Dh,
                                          weighted_rows, outer);
    const int64_t collected[2][2] = {{0, begin}, {end, depth}};  // positions [from, to)
    for (const auto& [from, to] : collected) {
      if (from == to) continue;
      const float* sums =
          collect_runs<typename T::BandVector>(b, to - from, cells + from, depth, run_of + from, scratch.per_run);
      weighted_products<T>(b, {sums, 1, b}, run_of[from], run_of[to - 1] - run_of[from] + 1, r0, stride, Dh,
                           weighted_rows, outer);
    }
  }
}

// A head's offset table (W = 2T - 1 rows of Dh, descending offsets) laid out as columns
// (Dh, ld) times a factor, zero padded, in descending or ascending offset order: the keys'
// role in add_skewed_product. Rebuilt only when the head's table changes (never, for a
// table shared by the heads).
class OffsetColumns {
 public:
  OffsetColumns(const OffsetTable& table, int64_t W, int64_t Dh, float factor, bool ascending)
      : table_(table), W_(W), Dh_(Dh), factor_(factor), ascending_(ascending),
        columns_(table.data ? Dh * ld() : 0, 0.0f) {}
  int64_t ld() const { return offset_columns_ld(W_); }
  const float* for_head(int64_t h) {
    const float* rows = table_.at(h);
    if (rows != built_from_) {
      for (int64_t r = 0; r < W_; ++r) {
        const int64_t column = ascending_ ? W_ - 1 - r : r;
        for (int64_t c = 0; c < Dh_; ++c) columns_[c * ld() + column] = factor_ * rows[r * Dh_ + c];
      }
      built_from_ = rows;
    }
    return columns_.data();
  }

 private:
  OffsetTable table_;
  int64_t W_, Dh_;
  float factor_;
  bool ascending_;
  std::vector<float> columns_;
  const float* built_from_ = nullptr;
};

// Where head h's share of a table's gradient starts (shared tables: one share).
float* head_rows(float* gradient, const OffsetTable& table, int64_t h, int64_t W, int64_t Dh) {
  return gradient + (table.head ? h * W * Dh : 0);
}

// The keys a block of queries [i0, i0 + rows) computes: all Tk, or, causal, those its last
// query sees; `padded` rounds up to whole kLanes (the products' width, k^T zero padded).
// of_query(i): the keys query i sees (its softmax's width).
struct KeysSeen {
  bool causal;
  int64_t keys, padded, all;
  KeysSeen(bool causal_mask, int64_t i0, int64_t rows, int64_t Tk)
      : causal(causal_mask), keys(causal_mask ? std::min(Tk, i0 + rows) : Tk), padded(round_up_to_lanes(keys)),
        all(Tk) {}
  int64_t of_query(int64_t i) const { return causal ? std::min(all, i + 1) : all; }
};

// Queries per block: a pair's scores are computed, used and dropped kQueryBlock rows at a
// time, so that the block's scores and gradients (kQueryBlock x T floats) stay in the L2
// cache next to the pair's (T, Dh) operands, and the saved probabilities are written and
// read back as one contiguous run per block. A multiple of kBlock and of every tile's rows.
constexpr int64_t kQueryBlock = 64;

// Bias gradient blocks (Tq x Tk) at least this large are summed over the batch head-major
// (see backward_pairs): 256 KB, small enough to stay in a core's L2 cache.
constexpr int64_t kHeadMajorCells = 65536;

// Narrow (narrow_head_dim): a separate instantiation, so that the other one's register
// allocation does not see the narrow products' code (with both in one function, GCC spilled
// registers in the p v tile at head size 32).
template <class T, bool Narrow>
PELAB_INLINE void forward_pairs(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                                float* probs, const MutableStrided& out) {
  const int64_t Tq = dims.queries, Tk = dims.keys, Dh = dims.head_dim, Tkp = round_up_to_lanes(Tk),
                ld_probs = probability_row_stride(Tk),
                ld = scratch_stride(Tk);
  const int64_t W = 2 * Tk - 1, first0 = Tk - 1;  // relative terms: Tq = Tk
  const int64_t c = in.clip;
  const int64_t table_rows = in.runs ? in.run_count : c > 0 ? 2 * c + 1 : W,  // of the query and value tables
      key_table_rows = in.runs ? in.run_count : W;
  const RunMaps runs(in, W);
  const int64_t block = std::min(kQueryBlock, Tq), ldt = scratch_stride(Tq);  // of q^T, q'^T
  constexpr bool narrow = Narrow;  // p v by narrow_product, from v^T's panels
  std::vector<float> key_columns(Dh * ld, 0.0f), values(narrow ? 0 : Tk * Dh), value_panels(narrow ? Dh * Tkp : 0),
      queries_t(Dh * ldt), offset_queries_t, scores(block * ld), inverse_sums(block);
  RelativeScratch scratch;
  const bool separate_offset_query = in.query_rows.data && in.offset_query.data;
  if (separate_offset_query) offset_queries_t.resize(Dh * ldt);
  OffsetColumns query_columns(in.query_rows, table_rows, Dh, 1.0f, /*ascending=*/false);
  OffsetColumns key_columns_relative(in.key_rows, key_table_rows, Dh, in.scale, /*ascending=*/true);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    transpose_rows<typename T::Vector>(in.k, b, h, Tk, Dh, key_columns.data(), ld);  // (Dh, Tkp), zero padded
    if (narrow)
      pack_column_panels(in.v, b, h, Tk, Dh, value_panels.data());  // Tkp / 16 panels of (Dh, 16)
    else
      gather_rows(in.v, b, h, Tk, Dh, values.data());  // (Tk, Dh)
    transpose_rows<typename T::Vector>(in.q, b, h, Tq, Dh, queries_t.data(), ldt, in.scale);  // q^T (Dh, Tq), scaled
    if (separate_offset_query)  // q'^T (Dh, Tq), scaled; else q' = q
      transpose_rows<typename T::Vector>(in.offset_query, b, h, Tq, Dh, offset_queries_t.data(), ldt, in.scale);
    const float* scaled_offset_queries_t = separate_offset_query ? offset_queries_t.data() : queries_t.data();
    float* o = out.at(b, h, 0);
    for (int64_t i0 = 0; i0 < Tq; i0 += block) {  // queries [i0, i0 + rows)
      const int64_t rows = std::min(block, Tq - i0);
      const KeysSeen seen(in.causal, i0, rows, Tk);  // keys [0, seen.keys)
      // scores = scale q k^T (+ the relative terms), seen.padded columns (k^T is zero
      // padded); the bias and the mask are added by the softmax's first pass
      set_product<T>(rows, Dh, Matrix{queries_t.data() + i0, ldt}.transposed(), key_columns.data(), ld,
                              scores.data(), ld, seen.padded);
      if (in.query_rows.data)  // scale q'_i . Rq[i - j]
        add_skewed_product<T>(rows, Dh, Matrix{scaled_offset_queries_t + i0, ldt}.transposed(),
                              query_columns.for_head(h), query_columns.ld(), Skew{first0 - i0, c, i0, runs.descending()},
                              scores.data(), ld, 1, seen.padded, scratch);
      if (in.key_rows.data)  // scale k_j . Rk[i - j], key-major, written transposed into the scores
        add_skewed_product<T>(seen.keys, Dh, Matrix{key_columns.data(), ld}.transposed(),
                              key_columns_relative.for_head(h), key_columns_relative.ld(),
                              Skew{first0 + i0, 0, 0, runs.ascending()}, scores.data(), 1, ld, rows, scratch);
      float* p = probs + (pair * Tq + i0) * ld_probs;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t visible = seen.of_query(i0 + i);  // the row's other keys are -inf, exp 0
        inverse_sums[i] =
            softmax_padded<T>(scores.data() + i * ld, in.bias.data ? in.bias.at(b, h, i0 + i) : nullptr,
                                               in.mask.data ? in.mask.at(b, h, i0 + i) : nullptr, visible, seen.padded,
                                               p + i * ld_probs);
        std::fill(p + i * ld_probs + visible, p + i * ld_probs + seen.keys, 0.0f);  // the backward reads them
      }
      // out = p (v + Rv[i - .]): the unnormalized exps from the scores' scratch (in the
      // cache; the saved copy is not) times (v + Rv), each row then scaled by 1 / its sum
      float* oi = o + i0 * out.row;
      const Matrix block_exps{scores.data(), ld};
      if (narrow)  // the exps are zero past the row's keys
        narrow_product_of_width</*Accumulate=*/false>(Dh, rows, seen.padded, scores.data(), ld, value_panels.data(),
                                                      oi, out.row);
      else
        set_product<T>(rows, seen.keys, block_exps, values.data(), Dh, oi, out.row, Dh);
      if (in.value_rows.data)
        add_skewed_weighted<T>(rows, seen.keys, block_exps, Dh, Skew{first0 - i0, c, i0, runs.descending()}, Dh,
                               SkewedRows{in.value_rows.at(h), oi, out.row}, SkewedOuter{}, scratch);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t d = 0; d < Dh; ++d) oi[i * out.row + d] *= inverse_sums[i];
    }
  }
}

// The (batch, head) pair (b * heads + h) the backward takes index-th: pair order, or
// head-major (h * batch + b; see backward_pairs).
PELAB_INLINE int64_t pair_at(const AttentionDims& dims, bool head_major, int64_t index) {
  return head_major ? index % dims.batch * dims.heads + index / dims.batch : index;
}

// Where the saved probabilities (rows ld_probs apart) of the backward's next block of
// queries start: row next_row of the pair it takes index-th, or (past its last row) the
// first row of the next pair before `end`; null after the last block.
PELAB_INLINE const float* next_block_probs(const AttentionDims& dims, const float* probs, int64_t ld_probs,
                                           bool head_major, int64_t index, int64_t end, int64_t next_row) {
  if (next_row >= dims.queries) {
    if (++index >= end) return nullptr;
    next_row = 0;
  }
  return probs + (pair_at(dims, head_major, index) * dims.queries + next_row) * ld_probs;
}

template <class T, bool Narrow>
PELAB_INLINE void backward_pairs(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                                 const float* probs, const Strided& grad_out, const AttentionGradients& grad) {
  const int64_t Tq = dims.queries, Tk = dims.keys, Dh = dims.head_dim, Tkp = round_up_to_lanes(Tk),
                ld_probs = probability_row_stride(Tk),
                ld = scratch_stride(Tk);
  const int64_t W = 2 * Tk - 1, first0 = Tk - 1;
  const int64_t c = in.clip;
  const int64_t table_rows = in.runs ? in.run_count : c > 0 ? 2 * c + 1 : W,  // of the query and value tables
      key_table_rows = in.runs ? in.run_count : W;
  const RunMaps runs(in, W);
  const int64_t block = std::min(kQueryBlock, Tq), ldt = scratch_stride(Tq);  // of dO^T
  std::vector<float> value_columns(Dh * ld, 0.0f), keys, queries(Tq * Dh), offset_queries, grad_outs(Tq * Dh),
      grad_scores(block * ld), grad_values_transposed(Dh * ld), grad_keys_transposed(Dh * ld),
      grad_outs_t(Dh * ldt);
  RelativeScratch scratch;
  constexpr bool narrow = Narrow;  // dS k by narrow_product, from k^T's panels
  std::vector<float> key_panels(narrow ? Dh * Tkp : 0);
  const bool row_major_keys = !narrow || in.key_rows.data;  // read by dQ's tile product or the key term
  if (row_major_keys) keys.resize(Tk * Dh);
  if (in.query_rows.data && in.offset_query.data) offset_queries.resize(Tq * Dh);
  OffsetColumns value_columns_relative(in.value_rows, table_rows, Dh, 1.0f, /*ascending=*/false);
  const bool bias_broadcasts = grad.bias.batch == 0 || grad.bias.head == 0 || grad.bias.row == 0;
  // The pairs' order: b * heads + h (neighbouring heads share the cache lines of q, k, v and
  // their gradients), except when a large bias gradient block is shared by the batch: then
  // head-major (h * batch + b), so that a head's (Tq, Tk) block stays in the L2 cache while
  // the batch adds into it (for small blocks, the pair order is faster).
  const bool head_major = grad.bias.data && grad.bias.batch == 0 && Tq * Tk >= kHeadMajorCells;
  for (int64_t index = begin; index < end; ++index) {
    const int64_t pair = pair_at(dims, head_major, index), b = pair / dims.heads, h = pair % dims.heads;
    transpose_rows<typename T::Vector>(in.v, b, h, Tk, Dh, value_columns.data(), ld);
    if (row_major_keys) gather_rows(in.k, b, h, Tk, Dh, keys.data());
    if (narrow) pack_column_panels(in.k, b, h, Tk, Dh, key_panels.data());  // Tkp / 16 panels of (Dh, 16)
    gather_rows(in.q, b, h, Tq, Dh, queries.data());
    gather_rows(grad_out, b, h, Tq, Dh, grad_outs.data());
    transpose_rows<typename T::Vector>(grad_out, b, h, Tq, Dh, grad_outs_t.data(), ldt);  // dO^T, the left factor of dP
    const float* offset_query_rows = queries.data();  // q'
    if (in.query_rows.data && in.offset_query.data) {
      gather_rows(in.offset_query, b, h, Tq, Dh, offset_queries.data());
      offset_query_rows = offset_queries.data();
    }
    float *dq = grad.q.at(b, h, 0), *dk = grad.k.at(b, h, 0), *dv = grad.v.at(b, h, 0);
    const int64_t ldq = grad.q.row, ldk = grad.k.row;
    const bool separate_offset_query = in.query_rows.data && in.offset_query.data;
    float* dqp = separate_offset_query ? grad.offset_query + pair * Tq * Dh : dq;  // dQ', rows ldqp apart
    const int64_t ldqp = separate_offset_query ? Dh : ldq;
    for (int64_t i = 0; i < Tq; ++i) std::fill(dq + i * ldq, dq + i * ldq + Dh, 0.0f);
    for (int64_t j = 0; j < Tk; ++j) std::fill(dk + j * ldk, dk + j * ldk + Dh, 0.0f);
    if (separate_offset_query) std::fill(dqp, dqp + Tq * Dh, 0.0f);
    // dV and dK are summed over the query blocks as dV^T and dK^T (Dh, Tk): see below
    std::fill(grad_values_transposed.begin(), grad_values_transposed.end(), 0.0f);
    std::fill(grad_keys_transposed.begin(), grad_keys_transposed.end(), 0.0f);
    for (int64_t i0 = 0; i0 < Tq; i0 += block) {  // queries [i0, i0 + rows)
      const int64_t rows = std::min(block, Tq - i0);
      const KeysSeen seen(in.causal, i0, rows, Tk);  // keys [0, seen.keys): P is 0 past them
      const float* p = probs + (pair * Tq + i0) * ld_probs;
      const float* grad_out_rows = grad_outs.data() + i0 * Dh;
      const Skew query_skew{first0 - i0, c, i0, runs.descending()}, key_skew{first0 + i0, 0, 0, runs.ascending()};
      // The next block's P (read from memory by its dS pass) is fetched during this block's
      // dV and dK products: in as many steps as those take tiles
      const int64_t next_rows = i0 + rows < Tq ? std::min(block, Tq - i0 - rows) : std::min(block, Tq),
                    tiles = 2 * ((Dh + T::R - 1) / T::R) * ((Tk + T::C * T::kWidth - 1) / (T::C * T::kWidth));
      PrefetchStream prefetch_next_probs(next_block_probs(dims, probs, ld_probs, head_major, index, end, i0 + rows),
                                         next_rows * ld_probs,
                                         (next_rows * ld_probs / kLineFloats + tiles - 1) / tiles);
      // dP = dO (v + Rv[i - .])^T, dO read from its transpose (column-major)
      const Matrix grad_out_block = Matrix{grad_outs_t.data() + i0, ldt}.transposed();
      set_product<T>(rows, Dh, grad_out_block, value_columns.data(), ld, grad_scores.data(), ld, seen.padded);
      if (in.value_rows.data)
        add_skewed_product<T>(rows, Dh, grad_out_block, value_columns_relative.for_head(h), value_columns_relative.ld(),
                              query_skew, grad_scores.data(), ld, 1, seen.padded, scratch);
      // dS = P * (dP - <P, dP>) row by row (the bias's gradient), then scaled: the factor
      // of every product below; zero from seen.keys to seen.padded (the narrow dQ product
      // reads whole vectors)
      const int64_t n = seen.keys;
      for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict pi = p + i * ld_probs;
        float* __restrict row = grad_scores.data() + i * ld;
        const float expected = dot<typename T::Vector>(pi, row, n), scale = in.scale;
        if (!grad.bias.data) {
          for (int64_t j = 0; j < n; ++j) row[j] = scale * (pi[j] * (row[j] - expected));
        } else if (bias_broadcasts) {
          float* __restrict bias_row = grad.bias.at(b, h, i0 + i);
          for (int64_t j = 0; j < n; ++j) {
            const float grad_score = pi[j] * (row[j] - expected);
            bias_row[j] += grad_score;
            row[j] = scale * grad_score;
          }
        } else {
          for (int64_t j = 0; j < n; ++j) row[j] = pi[j] * (row[j] - expected);
          float* bias_row = grad.bias.at(b, h, i0 + i);
          copy_streaming<typename T::Stores>(row, bias_row, n);  // read only after the backward
          std::fill(bias_row + n, bias_row + Tk, 0.0f);           // keys no query of the block sees
          for (int64_t j = 0; j < n; ++j) row[j] *= scale;
        }
        std::fill(row + n, row + seen.padded, 0.0f);
      }
      const Matrix dS{grad_scores.data(), ld};  // scaled
      // dQ = scale dS k; dQ' = scale dS Rq[i - .]; dRq[i - j] += scale dS_ij q'_i
      if (narrow)  // dS's columns past Tk meet the panels' zero padding
        narrow_product_of_width</*Accumulate=*/true>(Dh, rows, seen.padded, grad_scores.data(), ld,
                                                     key_panels.data(), dq + i0 * ldq, ldq);
      else
        add_product<T>(rows, n, dS, keys.data(), Dh, dq + i0 * ldq, ldq, Dh);
      if (in.query_rows.data) {
        add_skewed_weighted<T>(rows, n, dS, Dh, query_skew, Dh, SkewedRows{in.query_rows.at(h), dqp + i0 * ldqp, ldqp},
                               SkewedOuter{offset_query_rows + i0 * Dh, Dh,
                                           head_rows(grad.query_rows, in.query_rows, h, table_rows, Dh)},
                               scratch);
      }
      // dV = P^T dO, as dV^T += dO^T P (the long rows of P read along their length, not
      // down its columns); dRv[i - j] += P_ij dO_i
      add_product<T>(Dh, rows, Matrix{grad_out_rows, Dh}.transposed(), p, ld_probs, grad_values_transposed.data(),
                              ld, n, &prefetch_next_probs);
      if (in.value_rows.data)
        add_skewed_weighted<T>(rows, n, {p, ld_probs}, Dh, query_skew, Dh, SkewedRows{},
                               SkewedOuter{grad_out_rows, Dh, head_rows(grad.value_rows, in.value_rows, h, table_rows, Dh)},
                               scratch);
      // dK = scale dS^T q, as dK^T += q^T dS; key-major with an ascending table (rows read
      // backwards from the last descending one): dK_j += scale dS_ij Rk[i - j],
      // dRk[i - j] += scale dS_ij k_j
      add_product<T>(Dh, rows, Matrix{queries.data() + i0 * Dh, Dh}.transposed(), grad_scores.data(), ld,
                              grad_keys_transposed.data(), ld, n, &prefetch_next_probs);
      if (in.key_rows.data) {
        add_skewed_weighted<T>(n, rows, dS.transposed(), -Dh, key_skew, Dh,
                               SkewedRows{in.key_rows.at(h) + (key_table_rows - 1) * Dh, dk, ldk},
                               SkewedOuter{keys.data(), Dh,
                                           head_rows(grad.key_rows, in.key_rows, h, key_table_rows, Dh) +
                                               (key_table_rows - 1) * Dh},
                               scratch);
      }
    }
    transpose<typename T::Vector>(Dh, Tk, grad_values_transposed.data(), ld, dv, grad.v.row);
    transpose<typename T::Vector, /*Accumulate=*/true>(Dh, Tk, grad_keys_transposed.data(), ld, dk, ldk);
  }
}

}  // namespace

#define PELAB_FORWARD_PARAMETERS                                                                     \
  const AttentionDims &dims, int64_t begin, int64_t end, const AttentionInputs &in, float *probs, \
      MutableStrided out
#define PELAB_FORWARD_ARGUMENTS dims, begin, end, in, probs, out
#define PELAB_BACKWARD_PARAMETERS                                                                          \
  const AttentionDims &dims, int64_t begin, int64_t end, const AttentionInputs &in, const float *probs, \
      Strided grad_out, const AttentionGradients &grad
#define PELAB_BACKWARD_ARGUMENTS dims, begin, end, in, probs, grad_out, grad

namespace {

template <class T>
PELAB_INLINE void forward_tiles(PELAB_FORWARD_PARAMETERS) {
  if constexpr (T::kNarrowDots)
    if (narrow_head_dim(dims.head_dim)) return forward_pairs<T, true>(PELAB_FORWARD_ARGUMENTS);
  forward_pairs<T, false>(PELAB_FORWARD_ARGUMENTS);
}
template <class T>
PELAB_INLINE void backward_tiles(PELAB_BACKWARD_PARAMETERS) {
  if constexpr (T::kNarrowDots)
    if (narrow_head_dim(dims.head_dim)) return backward_pairs<T, true>(PELAB_BACKWARD_ARGUMENTS);
  backward_pairs<T, false>(PELAB_BACKWARD_ARGUMENTS);
}

void forward_baseline(PELAB_FORWARD_PARAMETERS) { forward_tiles<BaselineTile>(PELAB_FORWARD_ARGUMENTS); }
void backward_baseline(PELAB_BACKWARD_PARAMETERS) { backward_tiles<BaselineTile>(PELAB_BACKWARD_ARGUMENTS); }
#ifdef PELAB_X86_DISPATCH
PELAB_AVX2 void forward_avx2(PELAB_FORWARD_PARAMETERS) { forward_tiles<Avx2Tile>(PELAB_FORWARD_ARGUMENTS); }
PELAB_AVX2 void backward_avx2(PELAB_BACKWARD_PARAMETERS) { backward_tiles<Avx2Tile>(PELAB_BACKWARD_ARGUMENTS); }
PELAB_AVX512 void forward_avx512(PELAB_FORWARD_PARAMETERS) { forward_tiles<Avx512Tile>(PELAB_FORWARD_ARGUMENTS); }
PELAB_AVX512 void backward_avx512(PELAB_BACKWARD_PARAMETERS) { backward_tiles<Avx512Tile>(PELAB_BACKWARD_ARGUMENTS); }
#endif

}  // namespace

int64_t probability_row_stride(int64_t keys) { return spread_stride(keys); }

void attention_forward(PELAB_FORWARD_PARAMETERS) {
  PELAB_PICK_COPY(forward)(PELAB_FORWARD_ARGUMENTS);
  stream_fence();  // the probabilities went by streaming stores
}

void attention_backward(PELAB_BACKWARD_PARAMETERS) {
  PELAB_PICK_COPY(backward)(PELAB_BACKWARD_ARGUMENTS);
  stream_fence();  // the bias's gradient went by streaming stores
}

}  // namespace pelab::kernels
