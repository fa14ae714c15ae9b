// `transformer_xl`: Dai et al. 2019, "Transformer-XL", section 3.3
// (kimiyoung/transformer-xl pytorch/mem_transformer.py, RelPartialLearnableMultiHeadAttn):
//   score[i, j] = (q_i . k_j + u . k_j + q_i . W_R R[i - j] + v . W_R R[i - j]) / sqrt(Dh)
// R is the sinusoid table of Vaswani et al. in the [sin | cos] layout (inv_freq
// 1/10000^(2i/D)) of the relative distance i - j = query - key (Transformer-XL counts
// backwards from the query, pos_seq = klen-1 ... 0). W_R (D -> D, no bias) is per layer; the
// global biases u (r_w_bias) and v (r_r_bias), (H, Dh), are shared by all layers as in the
// PyTorch reference. Bidirectional attention generalizes the distances to [-(T-1), T-1]
// (DeepMind's randomized_positional_encodings does the same with offsets in [-T, T)).
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class TransformerXLImpl : public PositionEncodingImpl {
 public:
  TransformerXLImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // contiguous positions: W_R R as per-head query rows, met by q + v; (c) as the bias
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // W_R R of distances (W) int64: (H, W, Dh)
  torch::Tensor projected_relative_table(int64_t layer, const torch::Tensor& distances) const;
  const torch::Tensor& content_bias() const { return u_; }
  // term (c), s k_j . u: k (B, H, T, Dh) -> (B, H, 1, T)
  torch::Tensor content_bias_term(const torch::Tensor& k) const;
  // Dai et al.'s (b) content-position, (c) global content, (d) global position
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  const torch::Tensor& position_bias() const { return v_; }

 private:
  double base_;
  torch::Tensor u_, v_;                    // (H, Dh), shared by all layers
  std::vector<torch::Tensor> projection_;  // per layer W_R: (D, D), applied as R W_R^T
};

}  // namespace pelab
