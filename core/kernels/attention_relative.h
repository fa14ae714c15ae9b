// The fused attention kernels' relative terms, included by core/kernels/attention.cpp only:
// products with bands of per-offset tables shifted into place (the Transformer-XL relative
// shift, done by addressing), clipped tables (Shaw), tables given by runs of offsets
// (DeBERTa's log buckets), and their gradients.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernels/attention_products.h"

namespace pelab::kernels {

// Internal linkage, as the helpers had in attention.cpp: this header is included by that one
// file only, and GCC then inlines and lays out the kernels exactly as it did.
namespace {

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

}  // namespace

}  // namespace pelab::kernels
