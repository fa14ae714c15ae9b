// PaTH (core/encodings/path.h) by the paper's chunked form on the CPU, its bias or its whole
// attention, forward and backward, one (batch, head) pair per task of at::parallel_for, by
// single-threaded matrix products on the pair's own scratch:
//   inside a chunk of C tokens s..e-1, the UT transform: with A = I + beta tril(W W^T, -1),
//     [U | Wt] = A^-1 [beta tril(W K^T, -1) | beta W]   (unit lower triangular, solved in place)
//     S_ij - q_i . k_j = -sum_(j<t<=i) (q_i . w_t) U_tj          (keys j <= queries i inside)
//     k^_j = k_j - sum_t U_tj w_t                                 (key j carried to the chunk's end)
//     q~_i^T = q_i^T H_i ... H_s = q_i^T - sum_(t<=i) (q_i . w_t) Wt_t   (query back to its start)
//     P = H_(e-1) ... H_s = I - W^T Wt                            (the chunk's whole transport, Dh x Dh)
//   between chunks: S_ij = q~_i^T P_(c_i - 1) ... P_(c_j + 1) k^_j, the key chunks from the last
//   down, the later queries carried back one chunk's P at a time.
// A pair costs O(T^2 Dh) in matrix products (about what q k^T costs) and O(T C (C + Dh)) in the
// solves; the backward recomputes the forward's quantities (nothing but the bias, or the
// attention's output and log-sum-exp, is kept between the two). The products go to the BLAS LibTorch loaded (sgemm_, found at run time) or, where it
// exports none, to at::mm.
#pragma once

#include <torch/torch.h>

#include <array>
#include <utility>

namespace pelab::path_chunks {

// Measured on the bench shapes (docs/performance.md): below 64 tokens the row kernels
// (core/kernels/path_transport.h) with the fused attention are faster; chunks of 32 tokens up to
// T 1024, of 64 beyond (the bias form at T 512: 1.82x none's step with 32, 2.10x with 64; at
// T 2048: 2.87x with 32, 2.54x with 64).
constexpr int64_t kRowsBelow = 64;
inline int64_t chunk_for(int64_t tokens) { return tokens <= 1024 ? 32 : 64; }

// q, k, w: (B, H, T, Dh), beta: (B, H, T), float32 on the CPU -> the bias scale (S - q k^T)
// below the diagonal, 0 on and above it: (B, H, T, T)
torch::Tensor bias_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                           const torch::Tensor& beta, double scale, int64_t chunk);

// grad_bias: (B, H, T, T) (on and above the diagonal not read) -> the gradients of q, k, w, beta
std::array<torch::Tensor, 4> bias_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                           const torch::Tensor& beta, const torch::Tensor& grad_bias, double scale,
                                           int64_t chunk);

// PaTH's whole causal attention softmax_j(scale S_ij + mask_ij) v_j by the same chunks, one pair
// at a time in a (T, T) scratch per thread, so that no (B, H, T, T) tensor exists (the bias,
// its gradient, the probabilities): q, k, v, w: (B, H, T, Dh), beta: (B, H, T), float32 CPU;
// key_mask: additive (B|1, 1, T|1, T) (-inf: masked) or undefined -> out (B, H, T, Dh) and
// each row's log-sum-exp (B, H, T) (+inf where every key is masked: that row is 0)
std::pair<torch::Tensor, torch::Tensor> attention_forward(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& w,
                                                          const torch::Tensor& beta, const torch::Tensor& key_mask,
                                                          double scale, int64_t chunk);

// Its backward from the forward's out and lse (the scores recomputed) -> the gradients of q, k,
// v, w, beta
std::array<torch::Tensor, 5> attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& w, const torch::Tensor& beta,
                                                const torch::Tensor& key_mask, const torch::Tensor& out,
                                                const torch::Tensor& lse, const torch::Tensor& grad_out, double scale,
                                                int64_t chunk);

}  // namespace pelab::path_chunks
