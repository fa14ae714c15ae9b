// Fused CPU kernels for CoPE's bias (core/encodings/cope.h), torch-free: one query row at a time,
// the gates sigmoid(q_i . k_t * scale), their running sums (the contextual positions p_ij), and
// the bias interpolated between the row's products with the table, q_i . e[r], so that none of
// the unfused form's (B, H, T, T) intermediates (logits, gates, masked gates, sums, floors, weights,
// the gathered products) is made or kept for the backward, which recomputes each row:
//   causal:         p_ij = min(sum_{t=j..i} g_it, L) for j <= i, 0 for j > i (masked)
//   bidirectional:  as causal for j <= i, -sum_{t=i..j} g_it for j > i, clamped to [-L, L]
//   bias_ij = w q_i . e[ceil r] + (1 - w) q_i . e[floor r],  r = p_ij (+ L bidirectionally), w = r - floor r
// L = npos_max - 1. A clamped count passes no gradient (as torch's clamp).
#pragma once

#include <cstdint>

#include "core/kernels/attention.h"  // Strided, MutableStrided, AttentionDims

namespace pelab::kernels {

struct CopeInputs {
  Strided q, k;                 // (B, H, T, Dh) views, unit stride along Dh
  const float* table = nullptr;  // (rows, Dh) contiguous: e[0] .. e[rows - 1]
  int64_t rows = 0;
  int64_t limit = 0;  // L
  float scale = 1.0f;
  bool causal = true;
};

// bias: (B, H, T, T) view, written, for the pairs [begin, end).
void cope_bias_forward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                       MutableStrided bias);

// grad_bias: (B, H, T, T); grad_q, grad_k: (B, H, T, Dh) views, written; grad_table: (rows, Dh),
// this caller's share, added to; for the pairs [begin, end).
void cope_bias_backward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                        Strided grad_bias, MutableStrided grad_q, MutableStrided grad_k, float* grad_table);

}  // namespace pelab::kernels
