// `pope`: Polar Coordinate Position Embedding (Gopalakrishnan, Csordás, Schmidhuber & Mozer
// 2025, "Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings",
// arXiv 2509.10534; lucidrains/PoPE-pytorch, x-transformers PolarEmbedding and
// apply_polar_pos_emb). Content sets each component's magnitude, position its phase: every
// one of the head's Dh components c is a complex number of magnitude softplus(x_c) and phase
// p theta_c, theta_c = base^(-c/Dh) (Dh frequencies, not RoPE's Dh/2 pairs), and keys get a
// learned phase bias delta_{h,c}, clamped to [-2 pi, 0]:
//   q . k = sum_c softplus(q_c) softplus(k_c) cos((p_q - p_k) theta_c - delta_{h,c})
// computed as x-transformers does, q' = [a cos(phi), a sin(phi)] (2 Dh numbers per head), so
// that the scores are q' k'^T times 1/sqrt(Dh). One bias table shared by the blocks, as
// x-transformers' (the paper's code keeps one per model too). q' and k' are twice v's width:
// attention takes its unfused path (the fused CPU kernel and SDPA need one head size).
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class PopeImpl : public PositionEncodingImpl {
 public:
  PopeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;

 private:
  double base_;
  torch::Tensor key_bias_;  // (H, Dh): delta, used clamped to [-2 pi, 0]
};

}  // namespace pelab
