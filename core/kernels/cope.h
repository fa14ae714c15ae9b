// Fused CPU kernels for CoPE's bias (core/encodings/cope.h), torch-free: one query row at a time,
// from the row's scaled logits z_i. (its q_i . k_t * scale) and its products with the table
// P_i. = q_i . e[r] (both matrix products, made by the caller), the gates sigmoid(z_it), their
// running sums (the contextual positions p_ij) and the bias interpolated between two products,
// so that none of the unfused form's (B, H, T, T) intermediates (gates, masked gates, sums, floors,
// weights, the gathered products) is made or kept for the backward, which recomputes each row:
//   causal:         p_ij = min(sum_{t=j..i} g_it, L) for j <= i, 0 for j > i (masked)
//   bidirectional:  as causal for j <= i, -sum_{t=i..j} g_it for j > i, clamped to [-L, L]
//   bias_ij = w P_i[ceil r] + (1 - w) P_i[floor r],  r = p_ij (+ L bidirectionally), w = r - floor r
// L = npos_max - 1. A clamped count passes no gradient (as torch's clamp).
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

}  // namespace pelab::kernels
