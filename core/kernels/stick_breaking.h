// Fused CPU stick-breaking attention (Tan et al. 2024; the formula of
// core/encodings/stick_breaking.h) and its gradient, torch-free: one (batch, head) pair and one
// query row at a time, the keys from the query backwards, so that no (B, H, T, T) tensor is made
// (the scores and weights are recomputed in the backward). Causal by definition:
//   A_ij = sigmoid(z_ij) prod_{j < k < i} (1 - sigmoid(z_ik)),  z_ij = q_i . k_j * scale,
//   out_i = sum_j A_ij v_j,  over the keys j < i (j <= i with attend_current) not masked.
// A row stops at the first key whose remaining stick is below e^-87 (every farther weight is
// then below float's smallest normal number): long rows cost what the attended span does.
// Gradient, with g_j = dout_i . v_j:
//   dz_ik = g_k A_ik sigmoid(-z_ik) - sigmoid(z_ik) sum_{j < k} g_j A_ij
#pragma once

#include <cstdint>

#include "core/kernels/attention.h"  // Strided, MutableStrided, AttentionDims

namespace pelab::kernels {

struct StickBreakingInputs {
  Strided q, k, v;     // (B, H, T, Dh) views, unit stride along Dh
  float scale = 1.0f;
  Strided mask;        // additive (B|1, 1, T|1, T): a key is masked where it is -inf; null data: none
  bool attend_current = false;
};

// out: (B, H, T, Dh) view, written, for the pairs [begin, end) (pair = b * heads + h).
void stick_breaking_forward(const AttentionDims& dims, int64_t begin, int64_t end, const StickBreakingInputs& in,
                            MutableStrided out);

// grad_out: (B, H, T, Dh); grad_q, grad_k, grad_v: (B, H, T, Dh) views, written, for the pairs
// [begin, end) (a pair's keys are its own: threads over pairs write apart).
void stick_breaking_backward(const AttentionDims& dims, int64_t begin, int64_t end, const StickBreakingInputs& in,
                             Strided grad_out, MutableStrided grad_q, MutableStrided grad_k, MutableStrided grad_v);

}  // namespace pelab::kernels
