// `tupe`: TUPE, Ke, He & Liu 2021, "Rethinking Positional Encoding in Language Pre-training"
// (guolinke/TUPE, fairseq/modules/transformer_sentence_encoder.py). The position term is
// untied from the content term: absolute embeddings p (a learned table, LayerNorm'd) are
// projected by their own U_q, U_k, never added to the tokens, and
//   score_ij = (x_i W_q)(x_j W_k)^T / sqrt(2 Dh) + (p_i U_q)(p_j U_k)^T / sqrt(2 Dh)  [+ b(j - i)]
// per head. As the reference, one projection (U_q, U_k with biases) serves every layer
// (`per_layer: true` gives each block its own). `relative: true` is TUPE-R: T5's bucketed
// bias of key - query (bidirectional in an encoder, num_buckets 32, max_distance 128)
// added on top. The reference's [CLS] untying is not offered: no pelab task has a
// classification token. The absolute part is not shift invariant; the relative part is.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class TupeImpl : public PositionEncodingImpl {
 public:
  TupeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  void check_positions(const Positions& positions) const override;
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B'|1, H, Tq, Tk): the position term (+ TUPE-R's bias)
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // the untied position-position term, and TUPE-R's "relative bias"
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  double attention_scale() const override;  // 1 / sqrt(2 Dh)
  bool shift_invariant() const override { return false; }
  std::vector<PositionTable> position_tables() const override;

 private:
  // positions: (B'|1, T) -> (B'|1, H, T, Dh), the query (0) or key (1) half of U
  torch::Tensor projected(const torch::Tensor& positions, int64_t layer, int64_t half);

  int64_t max_positions_, num_buckets_, max_distance_;
  bool per_layer_;
  torch::Tensor table_;                  // (max_positions, D)
  torch::nn::LayerNorm norm_{nullptr};   // over the table's rows, as the reference's pos_ln
  torch::nn::ModuleList projections_;    // Linear(D, 2D): [U_q | U_k], one or one per block
  torch::Tensor relative_bias_;          // (num_buckets, H) with relative, else undefined
};

}  // namespace pelab
