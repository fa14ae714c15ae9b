// Fused CPU attention kernels (torch-free): softmax(q k^T * scale + additive tables +
// relative terms) v and its gradient, one (batch, head) pair at a time and 64 queries at a
// time, in a per-thread (64, T) scratch instead of (B, H, T, T) tensors for the raw, scaled
// and biased scores (only the probabilities are kept, for the backward). The
// products are register-tiled loops (a few query rows times two vectors of keys), the
// relative terms (HF relative_key / relative_key_query, Shaw, Transformer-XL, DeBERTa) are
// products with bands of per-offset tables shifted into place, and the backward works from
// the saved probabilities. At small head sizes (Dh = 8: the Ruoss et al. model) this
// replaces ~1000 tiny BLAS calls per product (see core/model/fused_attention.h for when it
// is used). The loops are compiled for AVX-512, AVX2 + FMA and baseline x86-64, picked at
// run time (core/kernels/instruction_sets.h).
#pragma once

#include <cstdint>

#include "core/kernels/attention_dropout.h"
#include "core/kernels/instruction_sets.h"  // which copy of the kernels runs

namespace pelab::kernels {

struct AttentionDims {
  int64_t batch = 1, heads = 1, queries = 1, keys = 1, head_dim = 1;
};

// A (batch, head, row, column) view of float32 data with unit stride along the last
// dimension: element (b, h, r, c) is data[b * batch + h * head + r * row + c]. A stride of 0
// broadcasts (an additive table shared by heads or batch elements).
struct Strided {
  const float* data = nullptr;
  int64_t batch = 0, head = 0, row = 0;
  const float* at(int64_t b, int64_t h, int64_t r) const { return data + b * batch + h * head + r * row; }
};
struct MutableStrided {
  float* data = nullptr;
  int64_t batch = 0, head = 0, row = 0;
  float* at(int64_t b, int64_t h, int64_t r) const { return data + b * batch + h * head + r * row; }
};

// Rows R (2T - 1, Dh) per head, one per offset query - key, in descending order (row c:
// offset T - 1 - c), for Tq = Tk = T and positions 0 .. T - 1: element (h, c, d) is
// data[h * head + c * Dh + d]; head = 0 shares one table between heads; null: absent.
struct OffsetTable {
  const float* data = nullptr;
  int64_t head = 0;
  const float* at(int64_t h) const { return data + h * head; }
};

// What attention reads. q: (B, H, Tq, Dh), k, v: (B, H, Tk, Dh); `bias` and `mask`: (B, H,
// Tq, Tk) views, either may have a null data pointer (absent). The relative terms (HF BERT
// relative_key / relative_key_query, Shaw, Transformer-XL, DeBERTa), each absent when its
// table is null:
//   scores[i, j] = scale (q_i . k_j + q'_i . Rq[i - j] + k_j . Rk[i - j]) + bias[i, j] + mask[i, j]
//   out_i = sum_j p_ij (v_j + Rv[i - j])
// where q' is `offset_query` ((B, H, Tq, Dh) view; null data: q itself).
struct AttentionInputs {
  Strided q, k, v;
  float scale = 1.0f;
  Strided bias, mask;
  OffsetTable query_rows, key_rows, value_rows;
  Strided offset_query;
  // > 0: the query and value tables have 2 clip + 1 rows, for the offsets clip down to
  // -clip (descending; farther offsets use the end rows: Shaw's clipping), and those terms
  // are products with the few rows, spread over each score row (the key table, if any,
  // stays (2T - 1, Dh))
  int64_t clip = 0;
  // Tables given by runs (not with clip): runs[c] (2T - 1 entries, for the offsets in the
  // tables' descending order; non-decreasing from 0 in steps of 0 or 1) is the row that
  // offset T - 1 - c reads, and every table has run_count rows, one per run of neighbouring
  // offsets that share a row (DeBERTa's log buckets: at T 512 the 1023 offsets take 511
  // rows). The products with a table are then computed once per run, and the tables'
  // gradients are per run. Null: one row per offset.
  const int32_t* runs = nullptr;
  int64_t run_count = 0;
  // Causal (Tq = Tk): query i sees keys j <= i only (as if the mask were -inf past i). A
  // block of queries computes the keys its last query sees and no further (forward and
  // backward): at T 512 about 56% of the products a bidirectional pass does.
  bool causal = false;
  // Attention dropout (attention_dropout.h): the forward drops probabilities of the pair
  // b * heads + h's query i by the decisions of row pair * Tq + i, and saves them with the
  // decisions in their sign bits; the backward (given the same dropout) reads them there:
  //   out_i = sum_j p_ij m_ij / (1 - p) (v_j + Rv[i - j]), m_ij = 0 where dropped, else 1
  AttentionDropout dropout;
};

// Where the backward writes. q, k, v: (B, H, T, Dh) views, written (the caller picks the
// memory order: (B, T, H, Dh) lets the heads' gradients merge without a copy). bias (null
// data: not wanted): the gradient of an additive bias, i.e. of the scores, as a (B, H, Tq,
// Tk) view shaped like the bias: where the bias broadcasts (a zero batch, head or row
// stride), the cells that share a bias element are summed into it, which the caller must
// have zeroed (a scheme's (1, H, T, T) bias gets a (1, H, T, T) gradient, not a (B, H, T,
// T) one to reduce afterwards); without broadcasting, each cell is written.
// offset_query: contiguous (B, H, Tq, Dh), written, when the inputs have a separate q';
// else q' = q and its gradient goes to q. query_rows, key_rows, value_rows (when the inputs
// have them): contiguous descending rows shaped like the inputs' tables ((H|1, 2T - 1,
// Dh), or run_count rows), added to (each caller's thread gives its own, then sums;
// likewise a broadcast bias).
struct AttentionGradients {
  MutableStrided q, k, v;
  MutableStrided bias;
  float* offset_query = nullptr;
  float *query_rows = nullptr, *key_rows = nullptr, *value_rows = nullptr;
};

// The row stride of the saved probabilities (B, H, Tq, stride) for Tk keys: Tk, or one
// cache line more when Tk is a multiple of 128 (512 bytes). The backward's dV product reads
// a block of rows down its columns; rows 2 KB apart (T 512) fell into 2 of the L1 cache's
// 64 sets, and every tile reloaded the block's panel from the L2 cache.
int64_t probability_row_stride(int64_t keys);

// Forward for the (batch, head) pairs [begin, end) (pair = b * heads + h). probs:
// contiguous (B, H, Tq, probability_row_stride(Tk)), written (columns Tk on are not; with
// dropout, the dropped ones negated); out: (B, H, Tq, Dh) view, written.
void attention_forward(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                       float* probs, MutableStrided out);

// Backward for the pairs of indices [begin, end): probs as attention_forward wrote them;
// grad_out: (B, H, Tq, Dh) view. Index = pair, except with a large bias gradient shared by
// the batch: then index = h * batch + b (head-major; the pair b * heads + h is still where
// its data lies).
void attention_backward(const AttentionDims& dims, int64_t begin, int64_t end, const AttentionInputs& in,
                        const float* probs, Strided grad_out, const AttentionGradients& grad);

}  // namespace pelab::kernels
