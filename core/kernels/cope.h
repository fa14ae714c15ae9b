// Fused CPU kernels for CoPE (core/encodings/cope.h), torch-free: one query row at a time, from
// the row's scaled logits z_i. (its q_i . k_t * scale) and its products with the table
// P_i. = q_i . e[r] (both matrix products, made by the caller), the gates sigmoid(z_it), their
// running sums (the contextual positions p_ij) and the bias interpolated between two products:
//   causal:         p_ij = min(sum_{t=j..i} g_it, L) for j <= i, 0 for j > i (masked)
//   bidirectional:  as causal for j <= i, -sum_{t=i..j} g_it for j > i, clamped to [-L, L]
//   bias_ij = w P_i[ceil r] + (1 - w) P_i[floor r],  r = p_ij (+ L bidirectionally), w = r - floor r
// L = npos_max - 1. A clamped count passes no gradient (as torch's clamp).
//
// Two forms. The bias kernels write CoPE's (B, H, T, T) bias for an attention that adds it
// (what runs with maps, logit scaling or attention dropout). The attention rows go further:
// given a block of query rows' logits they write the softmax of z + bias + mask, and in the
// backward z's gradient, so that the caller (core/encodings/cope.cpp) runs the whole
// attention a block of rows at a time and no (B, H, T, T) tensor exists at all.
#pragma once

#include <cstdint>

#include "core/kernels/attention.h"  // Strided, MutableStrided, AttentionDims

namespace pelab::kernels {

struct CopeInputs {
  Strided logits;    // z: (B, H, T, T), unit stride along the keys
  Strided products;  // P: (B, H, T, rows)
  int64_t rows = 0;
  int64_t limit = 0;  // L
  bool causal = true;
};

// bias: (B, H, T, T) view, written, for the pairs [begin, end) (pair = b * heads + h).
void cope_bias_forward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                       MutableStrided bias);

// grad_bias: (B, H, T, T); grad_logits: (B, H, T, T) and grad_products: (B, H, T, rows) views,
// written, for the pairs [begin, end).
void cope_bias_backward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                        Strided grad_bias, MutableStrided grad_logits, MutableStrided grad_products);

// A block of one (batch, head) pair's query rows [first, first + count) for the attention rows.
// Its key rows are 0 .. width - 1 with width = first + count causally (row i uses keys <= i),
// T otherwise; every (count, width) buffer below has row stride `stride`.
struct CopeRowBlock {
  int64_t first = 0, count = 0, queries = 0;  // queries: T (the keys are the same tokens)
  int64_t rows = 0, limit = 0;                // the table's rows, L
  bool causal = true;
  const float* products = nullptr;  // P of the block's rows: (count, rows), row stride `rows`
  const float* mask = nullptr;      // additive mask rows of the block (-inf: masked), or null
  int64_t mask_stride = 0;          // between the mask rows of consecutive queries (0: one row)
  int64_t width() const { return causal ? first + count : queries; }
};

// z: (count, width) scaled logits, overwritten with the attention probabilities
// softmax_j(z_ij + bias_ij + mask_ij) (0 at keys after the query, causally); lse: (count,)
// written, each row's log-sum-exp, for the backward.
void cope_attention_rows_forward(const CopeRowBlock& block, float* z, int64_t stride, float* lse);

// z: the same logits, recomputed; dp: (count, width) dout_i . v_j, overwritten with the
// gradient of z; delta: (count,) dout_i . out_i; lse: the forward's; probabilities: (count,
// width) written (for v's gradient); grad_products: (count, rows), row stride `rows`, written.
void cope_attention_rows_backward(const CopeRowBlock& block, const float* z, float* dp, int64_t stride,
                                  const float* lse, const float* delta, float* probabilities, float* grad_products);

}  // namespace pelab::kernels
