// Fused CPU kernels for PaTH's bias (core/encodings/path.h), torch-free:
//   bias_ij = scale (S_ij - q_i . k_j),  S_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j  (j <= i; 0 above
//   the diagonal, and on it, where S_ii = q_i . k_i),  H_t = I - beta_t w_t w_t^T
// one query row at a time: u = q_i, and from the nearest key back S_ij = u . k_j, then u <- H_j u
// (H is symmetric), so a row costs O(T Dh) and nothing of size T x T x Dh is made (carrying every
// key through every step, the unfused form, keeps T (B, H, T, Dh) tensors for autograd). The
// backward runs each row's recurrence in reverse from the u it recomputes.
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

}  // namespace pelab::kernels
