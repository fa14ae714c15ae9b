// `path`: PaTH attention (Yang et al. 2025, "PaTH Attention: Position Encoding via Accumulating
// Householder Transformations"; flash-linear-attention naive_path_attn and PaTHAttention). The
// key travels to the query through a data-dependent transformation per token in between:
//   score_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j * scale          (key j <= query i)
//   H_t = I - beta_t w_t w_t^T,   w_t = normalize(W_w x_t) per head,   beta_t = 2 sigmoid(u_h . x_t + b_h)
// x_t the block's attention input. Expressed as a bias on the plain scores, so that everything
// downstream (fused attention, maps, score terms) is unchanged:
//   bias_ij = scale * (q_i^T H_i ... H_{j+1} k_j - q_i . k_j)
// Computed by the paper's chunked (UT-transform) form: inside chunks a triangular solve, between
// them matrix products with each chunk's whole transport. On the CPU in float32 from 64 tokens
// on, the whole attention (attend) by kernels that take one (batch, head) pair at a time
// (core/encodings/path_chunks.h), with no (B, H, T, T) tensor; the bias (for maps, logit
// scaling, dropout, and below 64 tokens) by the same kernels, or by the row kernels of
// core/kernels/path_transport.h below 64; elsewhere (the GPU) the bias by the same form in
// batched torch operations (chunked_bias). transported_products, carrying every key through
// every step, is the reference the tests compare them all with.
// Causal only, as in the paper. The reference layer's short convolution on w and its low-rank
// W_w are left out (token mixing and a parametrization, not the position encoding). Option
// direction_bias (default true, as runs made before it): W_w has a bias, which the reference's
// w_proj (bias=False) does not; direction_bias: false is the reference (tests/peers compare
// with the bias zero, tests/test_data_dependent_schemes.cpp that false has none).
#pragma once

#include "core/config/options.h"
#include "core/encodings/position_encoding.h"

namespace pelab {

class PathImpl : public PositionEncodingImpl {
 public:
  PathImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
  static bool causal_only() { return true; }

  // q, k: (B, H, T, Dh) -> (B, H, T, T); 0 above the diagonal (masked keys)
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // The whole attention on the CPU in float32 (path_chunks::attention_forward: no (B, H, T, T)
  // tensor); elsewhere undefined (attention then adds score_bias)
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_mask, const AttentionContext& attention) override;
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  // The transformations of block `layer` for inputs x (B, T, D): w (B, H, T, Dh) unit vectors
  // and beta (B, H, T) in (0, 2)
  std::pair<torch::Tensor, torch::Tensor> transformations(const torch::Tensor& x, int64_t layer);
  // q_i^T H_i ... H_{j+1} k_j for j <= i, 0 above the diagonal: (B, H, T, T), float32, by
  // carrying every key through every step (the reference for the fused form)
  static torch::Tensor transported_products(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                            const torch::Tensor& beta);
  // The same bias by the chunked (UT-transform) form of the paper: inside chunks of `chunk`
  // tokens a triangular solve, between chunks matrix products with each chunk's whole transport
  // (Dh x Dh), n = T / chunk steps of (B, H, T, Dh) work; torch operations, so any device
  static torch::Tensor chunked_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                    const torch::Tensor& beta, double scale, int64_t chunk = 64);
  // The bias scale (S - q k^T) below the diagonal (0 on and above it), S the transported
  // products: by the CPU kernels for float32 q and k on the CPU (nothing T x T kept for the
  // backward), elsewhere by chunked_bias
  static torch::Tensor bias_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                               const torch::Tensor& beta, double scale);

 private:
  torch::nn::ModuleList directions_{nullptr}, strengths_{nullptr};  // per block: W_w (D -> D), u (D -> H)
};

}  // namespace pelab
