// Fused CPU kernels for PaTH's bias (core/encodings/path.h), torch-free:
//   bias_ij = scale (S_ij - q_i . k_j),  S_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j  (j <= i; 0 above
//   the diagonal, and on it, where S_ii = q_i . k_i),  H_t = I - beta_t w_t w_t^T
// one query row at a time: u = q_i, and from the nearest key back S_ij = u . k_j, then u <- H_j u
// (H is symmetric), so a row costs O(T Dh) and nothing of size T x T x Dh is made (carrying every
// key through every step, the unfused form, keeps T (B, H, T, Dh) tensors for autograd). The
// backward runs each row's recurrence in reverse from the u it recomputes. Used below 64 tokens
// (core/encodings/path_chunks.h: from there on the chunked form is faster).
#pragma once

#include <cstdint>

#include "core/kernels/attention.h"  // Strided, MutableStrided, AttentionDims

namespace pelab::kernels {

struct PathInputs {
  Strided q, k, w;  // (B, H, T, Dh) views, unit stride along Dh; w: unit vectors
  Strided beta;     // (B, H, T): element (b, h, t) at data[b * batch + h * head + t] (row stride 1)
  float scale = 1.0f;
};

// bias: (B, H, T, T) view, written (zeros on and above the diagonal), for the pairs [begin, end).
// (Subtracting q . k inside spares the caller a matrix product and four (B, H, T, T) passes.)
void path_transport_forward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                            MutableStrided bias);

// grad_bias: (B, H, T, T) (on and above the diagonal not read); grad_q, grad_k, grad_w: (B, H, T,
// Dh) views, grad_beta: (B, H, T) (row stride 1), written, for the pairs [begin, end).
void path_transport_backward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                             Strided grad_bias, MutableStrided grad_q, MutableStrided grad_k,
                             MutableStrided grad_w, MutableStrided grad_beta);

// The causal softmax rows of PaTH's own attention (core/encodings/path_chunks.h): rows i of
// [first, first + count) of `logits` (row stride ld, row i's keys 0..i; `mask`: additive rows,
// row i at mask + i * mask_stride, or null), overwritten with softmax_j(logits_ij + mask_ij)
// and zeros from i + 1 to `zero_end`; lse[i] written (+inf where every key is masked: the row
// is then 0, and so is the backward's exp(s - lse)).
void path_softmax_rows(float* logits, int64_t ld, int64_t first, int64_t count, int64_t zero_end, const float* mask,
                       int64_t mask_stride, float* lse);

// The backward of those rows: `probabilities` holds the recomputed logits, overwritten with
// the probabilities; `grad` holds dout_i . v_j, overwritten with the logits' gradient
// p_ij (grad_ij - delta_i), delta_i = dout_i . out_i; both zero from i + 1 to `zero_end`.
void path_softmax_rows_backward(float* probabilities, float* grad, int64_t ld, int64_t first, int64_t count,
                                int64_t zero_end, const float* mask, int64_t mask_stride, const float* lse,
                                const float* delta);

}  // namespace pelab::kernels
