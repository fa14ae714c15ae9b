// `fox`: the Forgetting Transformer (FoX; Lin et al., ICLR 2025, "Forgetting Transformer:
// Softmax Attention with a Forget Gate"; zhixuan-lin/forgetting-transformer,
// modeling_forgetting_transformer.py, fgate_type "full"). Each head forgets at a
// data-dependent rate: a gate per token t and head h, f_th = sigmoid(w_h . x_t + b_h), x_t
// the block's attention input, and the bias
//   D_ij = sum_{l = j+1}^{i} log f_l = L_i - L_j   (key j <= query i; L the cumulative sum of log f)
// added to the scaled scores; no other position information (positions are not read).
// The paper is causal. Bidirectional attention (pelab's extension) uses D_ij = -|L_i - L_j|:
// the log-gates of the tokens after the earlier of i and j, up to the later. One gate
// projection (d_model -> heads) per block, initialized as the reference: weights
// N(0, init_std^2), biases 0 (every gate 1/2 at the start).
#pragma once

#include "core/config/options.h"
#include "core/encodings/position_encoding.h"

namespace pelab {

class FoxImpl : public PositionEncodingImpl {
 public:
  FoxImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  // q, k: (B, H, T, Dh) -> (B, H, T, T)
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  // log f of every token and head of block `layer`: x (B, T, D) -> (B, H, T), float32
  torch::Tensor log_forget_gates(const torch::Tensor& x, int64_t layer);

 private:
  torch::nn::ModuleList gates_{nullptr};  // per block: Linear(d_model, heads), or a placeholder (encoding_mix)
};

}  // namespace pelab
