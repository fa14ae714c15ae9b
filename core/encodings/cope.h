// `cope`: Golovneva, Wang, Weston & Sukhbaatar 2024, "Contextual Position Encoding: Learning
// to Count What's Important" (CoPE; the paper's code listing, also lucidrains/x-transformers
// CoPE). Positions are counted by the model instead of given: a key's position relative to
// a query is the sum of gates over the keys between them,
//   g_it = sigmoid(q_i . k_t * attention_scale)      (the scaled logits, as the reference)
//   p_ij = sum_{t=j..i} g_it                          (keys j <= i)
// clamped to npos_max - 1, and the score gets q_i . e[p_ij] (q unscaled) with e[p]
// interpolated between the integer rows: e[p] = w e[ceil p] + (1 - w) e[floor p],
// w = p - floor p. One table e (npos_max, Dh) per layer, shared by the heads, initialised to
// zeros as the reference (`init: normal` draws N(0, 0.02^2) instead).
//
// The paper is causal. Bidirectionally, pelab counts keys after the query the same way with a
// sign: p_ij = -sum_{t=i..j} g_it for j > i, over a table of rows -(npos_max - 1) ..
// npos_max - 1. Either way p_ij sums gates of tokens between i and j only, so right padding
// (pelab's) never enters a real token's count and the hook needs no padding mask.
// The sampled positions are not used (CoPE counts from context): the scheme is shift
// invariant and a position sampler changes nothing. On the CPU in float32 fused kernels run the
// whole attention a block of query rows at a time (`attend`; core/kernels/cope.h): nothing
// (B, H, T, T) is made, and a row's counts are computed only out to the first key they clamp
// at (every farther key is clamped too). Where attention needs the bias itself (maps, logit
// scaling, attention dropout) the bias comes from the same row code.
#pragma once

#include "core/config/options.h"
#include "core/encodings/position_encoding.h"

namespace pelab {

class CopeImpl : public PositionEncodingImpl {
 public:
  CopeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  // q, k: (B, H, T, Dh) -> (B, H, T, T): q_i . e[p_ij]
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // q . e[p] as content-position (p counted from the context)
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override {
    return {{"content-position", score_bias(q, k, attention)}};
  }

  // The whole attention by the fused kernels (float32 CPU), without (B, H, T, T) tensors; else undefined
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_mask, const AttentionContext& attention) override;
  // The contextual positions p_ij of q, k: (B, H, T, Dh) -> (B, H, T, T), clamped to the table.
  torch::Tensor contextual_positions(const torch::Tensor& q, const torch::Tensor& k) const;
  // The bias from the (B, H, T, T) tensors above, as autograd sees them: the reference for the
  // fused CPU kernels (core/kernels/cope.h), which score_bias uses for float32 on the CPU
  torch::Tensor unfused_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& table) const;

 private:
  int64_t npos_max_;
  std::vector<torch::Tensor> tables_;  // per layer: (npos_max, Dh), bidirectional (2 npos_max - 1, Dh)
};

}  // namespace pelab
