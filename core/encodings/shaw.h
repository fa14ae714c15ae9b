// `shaw`: Shaw, Uszkoreit & Vaswani 2018, "Self-Attention with Relative Position
// Representations", as tensor2tensor's dot_product_attention_relative
// (tensor2tensor/layers/common_attention.py: _generate_relative_positions_matrix,
// _relative_attention_inner). Sign: key - query (tensor2tensor), clipped to [-k, k]:
//   e[i, j] = q_i . (k_j + aK[clip(j - i)]) / sqrt(Dh)
//   z_i     = sum_j a[i, j] (v_j + aV[clip(j - i)])
// Each layer owns a key table aK and a value table aV of 2k + 1 rows, shared by its heads.
// Clipping makes every length beyond training well defined.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/encodings/relative.h"
#include "core/config/options.h"

namespace pelab {

class ShawImpl : public PositionEncodingImpl {
 public:
  ShawImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // q . aK as content-position
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override {
    return {{"content-position", score_bias(q, k, attention)}};
  }
  torch::Tensor value_term(const torch::Tensor& probs, const AttentionContext& attention) override;
  bool has_value_term() const override { return !value_tables_.empty(); }
  // the key (and value) tables of every layer; row 0 is offset -clip
  std::vector<PositionTable> position_tables() const override;
  // contiguous positions: the key (and value) table rows of the offsets, for the fused attention
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // Table row of each offset (query - key): clip(key - query, -k, k) + k.
  torch::Tensor table_row(const torch::Tensor& offsets) const { return (-offsets).clamp(-clip_, clip_) + clip_; }
  torch::Tensor table_index(const Positions& positions) const { return table_row(relative_offsets(positions)); }

 private:
  int64_t clip_;
  std::vector<torch::Tensor> key_tables_, value_tables_;  // per layer: (2k + 1, Dh)
};

}  // namespace pelab
