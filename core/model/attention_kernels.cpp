#include "core/model/attention_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

// Every loop below is written so that GCC vectorizes it: a fixed block of kLanes independent
// accumulators, no reductions across lanes inside the loops. The entry points are compiled
// once per instruction set (AVX-512, AVX2 + FMA, baseline) and picked by what the CPU
// supports (by feature, not by CPU model: target_clones("arch=...") matches models only);
// the helpers are forced inline so that each copy is compiled for its instruction set.
#if defined(__x86_64__) && defined(__GNUC__)
#define PELAB_X86_DISPATCH 1
#endif
#define PELAB_INLINE __attribute__((always_inline)) inline

namespace pelab::kernels {

namespace {

constexpr int64_t kLanes = 16;  // one AVX-512 register, two AVX2 registers
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

int64_t round_up_to_lanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// exp(x) for x <= 0 (scores minus their row maximum), -inf -> 0, NaN -> NaN; relative error
// below 2e-7 (range reduction by ln 2, degree-6 Taylor polynomial on |r| <= ln(2)/2).
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

// Sixteen floats as one value (GCC/Clang vector extension): one AVX-512 register, two AVX2
// or four SSE ones, depending on the copy being compiled.
typedef float Float16 __attribute__((vector_size(64)));
PELAB_INLINE Float16 load16(const float* p) {
  Float16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
PELAB_INLINE void store16(float* p, Float16 v) { std::memcpy(p, &v, sizeof v); }

// y[0, n) += sum_r x[r] * m[r * ld + (0, n)], n a multiple of kLanes: a vector times a
// matrix whose rows are long (scores from q and k^T, score gradients from dO and v^T).
// Four column blocks at a time: four independent chains of FMAs, not one.
PELAB_INLINE void add_vector_times_rows(const float* __restrict x, int64_t rows, const float* __restrict m,
                                        int64_t ld, float* __restrict y, int64_t n) {
  int64_t c0 = 0;
  for (; c0 + 4 * kLanes <= n; c0 += 4 * kLanes) {
    Float16 a0 = load16(y + c0), a1 = load16(y + c0 + kLanes), a2 = load16(y + c0 + 2 * kLanes),
            a3 = load16(y + c0 + 3 * kLanes);
    for (int64_t r = 0; r < rows; ++r) {
      const float xr = x[r];
      const float* mr = m + r * ld + c0;
      a0 += xr * load16(mr);
      a1 += xr * load16(mr + kLanes);
      a2 += xr * load16(mr + 2 * kLanes);
      a3 += xr * load16(mr + 3 * kLanes);
    }
    store16(y + c0, a0);
    store16(y + c0 + kLanes, a1);
    store16(y + c0 + 2 * kLanes, a2);
    store16(y + c0 + 3 * kLanes, a3);
  }
  for (; c0 < n; c0 += kLanes) {
    Float16 a = load16(y + c0);
    for (int64_t r = 0; r < rows; ++r) a += x[r] * load16(m + r * ld + c0);
    store16(y + c0, a);
  }
}

// y[0, n) += sum_r a[r * lda + (0, n)] * b[r * ldb + (0, n)], n a multiple of kLanes: the
// column-wise dot products of two matrices with long rows (the key term k_j . Rk[i - j]).
PELAB_INLINE void add_rows_times_rows(const float* __restrict a, int64_t lda, const float* __restrict b,
                                      int64_t ldb, int64_t rows, float* __restrict y, int64_t n) {
  int64_t c0 = 0;
  for (; c0 + 2 * kLanes <= n; c0 += 2 * kLanes) {
    Float16 even0 = load16(y + c0), even1 = load16(y + c0 + kLanes), odd0 = {}, odd1 = {};
    int64_t r = 0;
    for (; r + 2 <= rows; r += 2) {
      const float *a0 = a + r * lda + c0, *b0 = b + r * ldb + c0, *a1 = a0 + lda, *b1 = b0 + ldb;
      even0 += load16(a0) * load16(b0);
      even1 += load16(a0 + kLanes) * load16(b0 + kLanes);
      odd0 += load16(a1) * load16(b1);
      odd1 += load16(a1 + kLanes) * load16(b1 + kLanes);
    }
    if (r < rows) {
      even0 += load16(a + r * lda + c0) * load16(b + r * ldb + c0);
      even1 += load16(a + r * lda + c0 + kLanes) * load16(b + r * ldb + c0 + kLanes);
    }
    store16(y + c0, even0 + odd0);
    store16(y + c0 + kLanes, even1 + odd1);
  }
  for (; c0 < n; c0 += kLanes) {
    Float16 sum = load16(y + c0);
    for (int64_t r = 0; r < rows; ++r) sum += load16(a + r * lda + c0) * load16(b + r * ldb + c0);
    store16(y + c0, sum);
  }
}

// Eight floats as one value (GCC/Clang vector extension): one AVX register, or two SSE
// ones in the baseline copy. Short head-size rows are held in these, not in arrays that
// the compiler might keep in memory.
typedef float Float8 __attribute__((vector_size(32)));

// out[0, D) = alpha * sum_r w[r] * m[r * ld + (0, D)]: a long vector times a matrix with short
// rows (probabilities times v, score gradients times k). D is a compile-time head size, a
// multiple of 8, where one is common (the sums stay in registers), else 0 = `d` at run time.
// The widest of Float16 / Float8 that divides a head size, with its load and store.
template <int64_t D>
struct HeadVector {
  static constexpr int64_t kWidth = D % 16 == 0 ? 16 : 8;
  using Type = std::conditional_t<kWidth == 16, Float16, Float8>;
  static PELAB_INLINE Type load(const float* p) {
    Type v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static PELAB_INLINE void store(float* p, Type v) { std::memcpy(p, &v, sizeof v); }
};

template <int64_t D>
PELAB_INLINE void weighted_row_sum(const float* __restrict w, int64_t rows, const float* __restrict m, int64_t ld,
                                   int64_t d, float alpha, float* __restrict out) {
  if constexpr (D > 0) {
    static_assert(D % 8 == 0, "compile-time head sizes are multiples of 8");
    using V = HeadVector<D>;
    constexpr int64_t kVectors = D / V::kWidth;
    // two independent sums per vector: not one chain of dependent FMAs
    typename V::Type even[kVectors] = {}, odd[kVectors] = {};
    int64_t r = 0;
    for (; r + 2 <= rows; r += 2) {
      const float w0 = w[r], w1 = w[r + 1];
      const float *m0 = m + r * ld, *m1 = m0 + ld;
      for (int64_t c = 0; c < kVectors; ++c) {
        even[c] += w0 * V::load(m0 + V::kWidth * c);
        odd[c] += w1 * V::load(m1 + V::kWidth * c);
      }
    }
    if (r < rows)
      for (int64_t c = 0; c < kVectors; ++c) even[c] += w[r] * V::load(m + r * ld + V::kWidth * c);
    for (int64_t c = 0; c < kVectors; ++c) V::store(out + V::kWidth * c, alpha * (even[c] + odd[c]));
  } else {
    for (int64_t c = 0; c < d; ++c) out[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float wr = w[r];
      const float* mr = m + r * ld;
      for (int64_t c = 0; c < d; ++c) out[c] += wr * mr[c];
    }
    for (int64_t c = 0; c < d; ++c) out[c] *= alpha;
  }
}

// m[r * D + (0, D)] += w[r] * x[0, D) for r < rows: a rank-one update of a (rows, D) block.
template <int64_t D>
PELAB_INLINE void add_outer(const float* __restrict w, int64_t rows, const float* __restrict x, int64_t d,
                            float* __restrict m) {
  if constexpr (D > 0) {
    using V = HeadVector<D>;
    constexpr int64_t kVectors = D / V::kWidth;
    typename V::Type xs[kVectors];
    for (int64_t c = 0; c < kVectors; ++c) xs[c] = V::load(x + V::kWidth * c);
    for (int64_t r = 0; r < rows; ++r) {
      const float wr = w[r];
      float* mr = m + r * D;
      for (int64_t c = 0; c < kVectors; ++c) V::store(mr + V::kWidth * c, V::load(mr + V::kWidth * c) + wr * xs[c]);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const float wr = w[r];
      float* mr = m + r * d;
      for (int64_t c = 0; c < d; ++c) mr[c] += wr * x[c];
    }
  }
}

// m[r * D + (0, D)] += w[r] * x[r * D + (0, D)] for r < rows: rows scaled one by one (the
// key term's gradients: dK_j += dS_ij Rk[i - j], dRk[i - j] += dS_ij k_j).
template <int64_t D>
PELAB_INLINE void add_scaled_rows(const float* __restrict w, int64_t rows, const float* __restrict x, int64_t d,
                                  float* __restrict m) {
  if constexpr (D > 0) {
    using V = HeadVector<D>;
    constexpr int64_t kVectors = D / V::kWidth;
    for (int64_t r = 0; r < rows; ++r) {
      const float wr = w[r];
      const float* xr = x + r * D;
      float* mr = m + r * D;
      for (int64_t c = 0; c < kVectors; ++c)
        V::store(mr + V::kWidth * c, V::load(mr + V::kWidth * c) + wr * V::load(xr + V::kWidth * c));
    }
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < d; ++c) m[r * d + c] += w[r] * x[r * d + c];
  }
}

// Row r of a (B, H, rows, Dh) view copied into column r of a (Dh, ld) block: k^T, v^T.
PELAB_INLINE void transpose_rows(const Strided& s, int64_t b, int64_t h, int64_t rows, int64_t d, float* t,
                                 int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = s.at(b, h, r);
    for (int64_t c = 0; c < d; ++c) t[c * ld + r] = src[c];
  }
}

// Rows of a (B, H, rows, Dh) view copied into a contiguous (rows, Dh) block.
PELAB_INLINE void gather_rows(const Strided& s, int64_t b, int64_t h, int64_t rows, int64_t d, float* out) {
  for (int64_t r = 0; r < rows; ++r) std::copy(s.at(b, h, r), s.at(b, h, r) + d, out + r * d);
}

// Softmax of row[0, n) in place over the padded width np (row[n, np) must be -inf).
PELAB_INLINE void softmax_padded(float* row, int64_t np) {
  float lane_max[kLanes];
  for (int64_t c = 0; c < kLanes; ++c) lane_max[c] = kNegativeInfinity;
  for (int64_t j0 = 0; j0 < np; j0 += kLanes)
    for (int64_t c = 0; c < kLanes; ++c) lane_max[c] = row[j0 + c] > lane_max[c] ? row[j0 + c] : lane_max[c];
  float maximum = kNegativeInfinity;
  for (int64_t c = 0; c < kLanes; ++c) maximum = lane_max[c] > maximum ? lane_max[c] : maximum;
  for (int64_t j = 0; j < np; ++j) row[j] = exp_nonpositive(row[j] - maximum);
  float lane_sum[kLanes] = {};
  for (int64_t j0 = 0; j0 < np; j0 += kLanes)
    for (int64_t c = 0; c < kLanes; ++c) lane_sum[c] += row[j0 + c];
  float sum = 0.0f;
  for (int64_t c = 0; c < kLanes; ++c) sum += lane_sum[c];
  const float inverse = 1.0f / sum;
  for (int64_t j = 0; j < np; ++j) row[j] *= inverse;
}

// A head's offset table (W = 2T - 1, Dh), descending offsets, laid out as columns (Dh, W +
// kLanes) times a factor, zero padded: the keys' role in the relative terms, read from
// column T - 1 - i on for query i. Rebuilt only when the head's table changes (never, for
// a table shared by the heads).
class OffsetColumns {
 public:
  OffsetColumns(const OffsetTable& table, int64_t W, int64_t Dh, float factor)
      : table_(table), W_(W), Dh_(Dh), factor_(factor), columns_(table.data ? Dh * ld() : 0, 0.0f) {}
  int64_t ld() const { return W_ + kLanes; }
  const float* for_head(int64_t h) {
    const float* rows = table_.at(h);
    if (rows != built_from_) {
      for (int64_t r = 0; r < W_; ++r)
        for (int64_t c = 0; c < Dh_; ++c) columns_[c * ld() + r] = factor_ * rows[r * Dh_ + c];
      built_from_ = rows;
    }
    return columns_.data();
  }

 private:
  OffsetTable table_;
  int64_t W_, Dh_;
  float factor_;
  std::vector<float> columns_;
  const float* built_from_ = nullptr;
};

// Where head h's share of a table's gradient starts (shared tables: one share).
float* head_rows(float* gradient, const OffsetTable& table, int64_t h, int64_t W, int64_t Dh) {
  return gradient + (table.head ? h * W * Dh : 0);
}

template <int64_t D>
PELAB_INLINE void forward_pairs(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                                float* probs, const MutableStrided& out) {
  const int64_t Tq = dims.queries, Tk = dims.keys, Dh = dims.head_dim, Tkp = round_up_to_lanes(Tk);
  const Strided &q = in.q, &k = in.k, &v = in.v, &bias = in.bias, &mask = in.mask;
  const Strided& offset_query = in.offset_query.data ? in.offset_query : in.q;
  std::vector<float> key_columns(Dh * Tkp, 0.0f), values(Tk * Dh), scores(Tkp), scaled_query(Dh),
      scaled_offset_query(Dh), value_part(Dh);
  // relative terms: row i reads the offsets i - j for j = 0, 1, ...: from row / column
  // first = Tk - 1 - i of the descending tables on, ascending
  const int64_t W = 2 * Tk - 1;
  OffsetColumns query_columns(in.query_rows, W, Dh, 1.0f), key_columns_relative(in.key_rows, W, Dh, in.scale);
  float* __restrict row = scores.data();
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    transpose_rows(k, b, h, Tk, Dh, key_columns.data(), Tkp);  // (Dh, Tkp), zero padded
    gather_rows(v, b, h, Tk, Dh, values.data());                // (Tk, Dh)
    const float* Rq = in.query_rows.data ? query_columns.for_head(h) : nullptr;
    const float* Rk = in.key_rows.data ? key_columns_relative.for_head(h) : nullptr;
    const float* Rv = in.value_rows.data ? in.value_rows.at(h) : nullptr;
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t first = Tk - 1 - i;
      const float* qi = q.at(b, h, i);
      for (int64_t c = 0; c < Dh; ++c) scaled_query[c] = qi[c] * in.scale;
      const float* __restrict bi = bias.data ? bias.at(b, h, i) : nullptr;
      const float* __restrict mi = mask.data ? mask.at(b, h, i) : nullptr;
      if (bi && mi)
        for (int64_t j = 0; j < Tk; ++j) row[j] = bi[j] + mi[j];
      else if (bi || mi)
        std::copy(bi ? bi : mi, (bi ? bi : mi) + Tk, row);
      else
        std::fill(row, row + Tk, 0.0f);
      std::fill(row + Tk, row + Tkp, 0.0f);
      add_vector_times_rows(scaled_query.data(), Dh, key_columns.data(), Tkp, row, Tkp);
      if (Rq) {
        const float* qpi = offset_query.at(b, h, i);
        for (int64_t c = 0; c < Dh; ++c) scaled_offset_query[c] = qpi[c] * in.scale;
        add_vector_times_rows(scaled_offset_query.data(), Dh, Rq + first, query_columns.ld(), row, Tkp);
      }
      if (Rk) add_rows_times_rows(key_columns.data(), Tkp, Rk + first, key_columns_relative.ld(), Dh, row, Tkp);
      std::fill(row + Tk, row + Tkp, kNegativeInfinity);
      softmax_padded(row, Tkp);
      float* pi = probs + (pair * Tq + i) * Tk;
      std::copy(row, row + Tk, pi);
      float* oi = out.at(b, h, i);
      weighted_row_sum<D>(pi, Tk, values.data(), Dh, Dh, 1.0f, oi);
      if (Rv) {
        weighted_row_sum<D>(pi, Tk, Rv + first * Dh, Dh, Dh, 1.0f, value_part.data());
        for (int64_t c = 0; c < Dh; ++c) oi[c] += value_part[c];
      }
    }
  }
}

template <int64_t D>
PELAB_INLINE void backward_pairs(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                                 const float* probs, const Strided& grad_out, const AttentionGradients& grad) {
  const int64_t Tq = dims.queries, Tk = dims.keys, Dh = dims.head_dim, Tkp = round_up_to_lanes(Tk);
  const Strided &q = in.q, &k = in.k, &v = in.v;
  const Strided& offset_query = in.offset_query.data ? in.offset_query : in.q;
  std::vector<float> value_columns(Dh * Tkp, 0.0f), grad_probs(Tkp), grad_row(Tk), scaled_grad(Tk),
      offset_part(Dh);
  // k rows gathered contiguously (they may be strided views of the qkv projection)
  std::vector<float> keys(Tk * Dh);
  const int64_t W = 2 * Tk - 1;
  OffsetColumns value_offset_columns(in.value_rows, W, Dh, 1.0f);  // dP_ij gets dO_i . Rv[i - j]
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    transpose_rows(v, b, h, Tk, Dh, value_columns.data(), Tkp);
    gather_rows(k, b, h, Tk, Dh, keys.data());
    float* dk = grad.k + pair * Tk * Dh;
    float* dv = grad.v + pair * Tk * Dh;
    std::fill(dk, dk + Tk * Dh, 0.0f);
    std::fill(dv, dv + Tk * Dh, 0.0f);
    const float* Rq = in.query_rows.data ? in.query_rows.at(h) : nullptr;
    const float* Rk = in.key_rows.data ? in.key_rows.at(h) : nullptr;
    const float* Rv_columns = in.value_rows.data ? value_offset_columns.for_head(h) : nullptr;
    float* dRq = Rq ? head_rows(grad.query_rows, in.query_rows, h, W, Dh) : nullptr;
    float* dRk = Rk ? head_rows(grad.key_rows, in.key_rows, h, W, Dh) : nullptr;
    float* dRv = Rv_columns ? head_rows(grad.value_rows, in.value_rows, h, W, Dh) : nullptr;
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t first = Tk - 1 - i;  // descending row of offset i - 0
      const float* doi = grad_out.at(b, h, i);
      const float* pi = probs + (pair * Tq + i) * Tk;
      // dP_i = dO_i (v + Rv[i - .])^T
      std::fill(grad_probs.begin(), grad_probs.end(), 0.0f);
      add_vector_times_rows(doi, Dh, value_columns.data(), Tkp, grad_probs.data(), Tkp);
      if (Rv_columns) add_vector_times_rows(doi, Dh, Rv_columns + first, value_offset_columns.ld(), grad_probs.data(), Tkp);
      // dS_i = P_i * (dP_i - <P_i, dP_i>)
      float lane_dot[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= Tk; j += kLanes)
        for (int64_t c = 0; c < kLanes; ++c) lane_dot[c] += pi[j + c] * grad_probs[j + c];
      float dot = 0.0f;
      for (int64_t c = 0; c < kLanes; ++c) dot += lane_dot[c];
      for (; j < Tk; ++j) dot += pi[j] * grad_probs[j];
      for (int64_t jj = 0; jj < Tk; ++jj) grad_row[jj] = pi[jj] * (grad_probs[jj] - dot);
      if (grad.scores) std::copy(grad_row.begin(), grad_row.end(), grad.scores + (pair * Tq + i) * Tk);
      // dV += P_i^T dO_i; dRv[i - j] += P_ij dO_i
      add_outer<D>(pi, Tk, doi, Dh, dv);
      if (dRv) add_outer<D>(pi, Tk, doi, Dh, dRv + first * Dh);
      // dQ_i = scale dS_i k; dK += scale dS_i^T q_i
      float* dqi = grad.q + (pair * Tq + i) * Dh;
      weighted_row_sum<D>(grad_row.data(), Tk, keys.data(), Dh, Dh, in.scale, dqi);
      for (int64_t jj = 0; jj < Tk; ++jj) scaled_grad[jj] = in.scale * grad_row[jj];
      add_outer<D>(scaled_grad.data(), Tk, q.at(b, h, i), Dh, dk);
      if (Rq) {  // dQ'_i = scale dS_i Rq[i - .]; dRq[i - j] += scale dS_ij q'_i
        float* dqpi = grad.offset_query ? grad.offset_query + (pair * Tq + i) * Dh : offset_part.data();
        weighted_row_sum<D>(grad_row.data(), Tk, Rq + first * Dh, Dh, Dh, in.scale, dqpi);
        if (!grad.offset_query)
          for (int64_t c = 0; c < Dh; ++c) dqi[c] += offset_part[c];
        add_outer<D>(scaled_grad.data(), Tk, offset_query.at(b, h, i), Dh, dRq + first * Dh);
      }
      if (Rk) {  // dK_j += scale dS_ij Rk[i - j]; dRk[i - j] += scale dS_ij k_j
        add_scaled_rows<D>(scaled_grad.data(), Tk, Rk + first * Dh, Dh, dk);
        add_scaled_rows<D>(scaled_grad.data(), Tk, keys.data(), Dh, dRk + first * Dh);
      }
    }
  }
}

}  // namespace

#define PELAB_FOR_EVERY_HEAD_SIZE(function, ...)              \
  switch (dims.head_dim) {                                    \
    case 8: return function<8>(__VA_ARGS__);                  \
    case 16: return function<16>(__VA_ARGS__);                \
    case 32: return function<32>(__VA_ARGS__);                \
    case 64: return function<64>(__VA_ARGS__);                \
    default: return function<0>(__VA_ARGS__);                 \
  }
#define PELAB_FORWARD_PARAMETERS                                                                     \
  const AttentionDims &dims, int64_t begin, int64_t end, const AttentionInputs &in, float *probs, \
      MutableStrided out
#define PELAB_FORWARD_ARGUMENTS dims, begin, end, in, probs, out
#define PELAB_BACKWARD_PARAMETERS                                                                          \
  const AttentionDims &dims, int64_t begin, int64_t end, const AttentionInputs &in, const float *probs, \
      Strided grad_out, const AttentionGradients &grad
#define PELAB_BACKWARD_ARGUMENTS dims, begin, end, in, probs, grad_out, grad

namespace {

void forward_baseline(PELAB_FORWARD_PARAMETERS) { PELAB_FOR_EVERY_HEAD_SIZE(forward_pairs, PELAB_FORWARD_ARGUMENTS) }
void backward_baseline(PELAB_BACKWARD_PARAMETERS) {
  PELAB_FOR_EVERY_HEAD_SIZE(backward_pairs, PELAB_BACKWARD_ARGUMENTS)
}
#ifdef PELAB_X86_DISPATCH
#define PELAB_AVX2 __attribute__((target("avx2,fma")))
#define PELAB_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
PELAB_AVX2 void forward_avx2(PELAB_FORWARD_PARAMETERS) { PELAB_FOR_EVERY_HEAD_SIZE(forward_pairs, PELAB_FORWARD_ARGUMENTS) }
PELAB_AVX2 void backward_avx2(PELAB_BACKWARD_PARAMETERS) {
  PELAB_FOR_EVERY_HEAD_SIZE(backward_pairs, PELAB_BACKWARD_ARGUMENTS)
}
PELAB_AVX512 void forward_avx512(PELAB_FORWARD_PARAMETERS) {
  PELAB_FOR_EVERY_HEAD_SIZE(forward_pairs, PELAB_FORWARD_ARGUMENTS)
}
PELAB_AVX512 void backward_avx512(PELAB_BACKWARD_PARAMETERS) {
  PELAB_FOR_EVERY_HEAD_SIZE(backward_pairs, PELAB_BACKWARD_ARGUMENTS)
}
#endif

enum class InstructionSet { baseline, avx2, avx512 };
const char* const kInstructionSetNames[] = {"baseline", "avx2", "avx512"};

InstructionSet best_instruction_set() {
#ifdef PELAB_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return InstructionSet::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return InstructionSet::avx2;
#endif
  return InstructionSet::baseline;
}

std::atomic<int>& chosen_instruction_set() {
  static std::atomic<int> chosen{static_cast<int>(best_instruction_set())};
  return chosen;
}

InstructionSet instruction_set() { return static_cast<InstructionSet>(chosen_instruction_set().load()); }

}  // namespace

std::vector<std::string> supported_instruction_sets() {
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(best_instruction_set()); ++i) names.push_back(kInstructionSetNames[i]);
  return names;
}

std::string instruction_set_in_use() { return kInstructionSetNames[static_cast<int>(instruction_set())]; }

void use_instruction_set(const std::string& name) {
  const auto supported = supported_instruction_sets();
  for (size_t i = 0; i < supported.size(); ++i)
    if (supported[i] == name) {
      chosen_instruction_set() = static_cast<int>(i);
      return;
    }
  throw std::invalid_argument("this CPU cannot run the '" + name + "' attention kernels");
}

void attention_forward(PELAB_FORWARD_PARAMETERS) {
#ifdef PELAB_X86_DISPATCH
  switch (instruction_set()) {
    case InstructionSet::avx512: return forward_avx512(PELAB_FORWARD_ARGUMENTS);
    case InstructionSet::avx2: return forward_avx2(PELAB_FORWARD_ARGUMENTS);
    case InstructionSet::baseline: break;
  }
#endif
  forward_baseline(PELAB_FORWARD_ARGUMENTS);
}

void attention_backward(PELAB_BACKWARD_PARAMETERS) {
#ifdef PELAB_X86_DISPATCH
  switch (instruction_set()) {
    case InstructionSet::avx512: return backward_avx512(PELAB_BACKWARD_ARGUMENTS);
    case InstructionSet::avx2: return backward_avx2(PELAB_BACKWARD_ARGUMENTS);
    case InstructionSet::baseline: break;
  }
#endif
  backward_baseline(PELAB_BACKWARD_ARGUMENTS);
}

}  // namespace pelab::kernels
