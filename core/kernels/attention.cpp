#include "core/kernels/attention.h"

#include <algorithm>
#include <vector>

#include "core/kernels/attention_products.h"
#include "core/kernels/attention_relative.h"
#include "core/kernels/instruction_sets.h"

// The work is small matrix products (scores = q k^T, p v, and their gradients) done by one
// register-tiled loop (product_tile: a few rows times two vectors of columns, so that each
// load of the right-hand matrix feeds several FMAs), plus row-wise softmax; the relative
// terms are the same products on bands of an offset table, shifted into place. Every loop
// is written so that GCC vectorizes it (GCC vector extensions, no reductions across lanes).
// This file holds the per-pair forward and backward and the entry points; the products are in
// attention_products.h, the relative terms in attention_relative.h. The entry points are
// compiled once per instruction set (AVX-512, AVX2 + FMA, baseline) and picked by what the CPU
// supports (by feature, not by CPU model: target_clones("arch=...") matches models only;
// core/kernels/instruction_sets.h); the helpers are forced inline so that each copy is
// compiled for its instruction set, and templated on the copy's vector type (Tile::Vector:
// Float16, Float8 or Float4), since a vector wider than the copy's registers lives on the
// stack (vector_math.h).

namespace pelab::kernels {

namespace {

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
        RowDropout drop{};  // the row's seed only when dropout is on (a 64-bit hash per row)
        if (in.dropout.active())
          drop = {dropout_row_seed(in.dropout.key, pair * Tq + i0 + i), in.dropout.threshold, in.dropout.keep_scale};
        inverse_sums[i] =
            softmax_padded<T>(scores.data() + i * ld, in.bias.data ? in.bias.at(b, h, i0 + i) : nullptr,
                                               in.mask.data ? in.mask.at(b, h, i0 + i) : nullptr, visible, seen.padded,
                                               p + i * ld_probs, in.dropout.active() ? &drop : nullptr);
        std::fill(p + i * ld_probs + visible, p + i * ld_probs + seen.keys, 0.0f);  // the backward reads them
      }
      // out = p (v + Rv[i - .]): the unnormalized exps from the scores' scratch (in the
      // cache; the saved copy is not; with dropout, dropped and rescaled) times (v + Rv),
      // each row then scaled by 1 / its sum
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
  // With dropout: a block's P and the attended P m / (1 - p) (restore_dropout)
  std::vector<float> plain_probs(in.dropout.active() ? block * ld : 0), attended(in.dropout.active() ? block * ld : 0);
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
      // With dropout, what was computed is dA, the gradient of the attended probabilities:
      // dP = dA m / (1 - p); P and the attended P come from the saved probabilities' signs
      const int64_t n = seen.keys;
      const float *p_plain = p, *p_attended = p;  // P (for dS), P m / (1 - p) (for dV, dRv)
      int64_t ld_p = ld_probs;                      // both's row stride
      if (in.dropout.active()) {
        restore_dropout<T>(rows, n, seen.padded, p, ld_probs, in.dropout.keep_scale, grad_scores.data(),
                           plain_probs.data(), attended.data(), ld);
        p_plain = plain_probs.data(), p_attended = attended.data(), ld_p = ld;
      }
      // dS = P * (dP - <P, dP>) row by row (the bias's gradient), then scaled: the factor
      // of every product below; zero from seen.keys to seen.padded (the narrow dQ product
      // reads whole vectors)
      for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict pi = p_plain + i * ld_p;
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
      // down its columns); dRv[i - j] += P_ij dO_i (P: the attended probabilities)
      add_product<T>(Dh, rows, Matrix{grad_out_rows, Dh}.transposed(), p_attended, ld_p, grad_values_transposed.data(),
                     ld, n, &prefetch_next_probs);
      if (in.value_rows.data)
        add_skewed_weighted<T>(rows, n, {p_attended, ld_p}, Dh, query_skew, Dh, SkewedRows{},
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
