// `deberta`: disentangled attention of DeBERTa (He et al. 2021) in its v2/v3 form
// (huggingface/transformers src/transformers/models/deberta_v2/modeling_deberta_v2.py:
// make_log_bucket_position, build_relative_position, DisentangledSelfAttention.
// disentangled_attention_bias; microsoft/DeBERTa DeBERTa/deberta/disentangled_attention.py).
// Sign: delta(i, j) = bucket(query - key). With S = position_buckets (or
// max_relative_positions when buckets are off) and idx = clamp(delta + S, 0, 2S - 1):
//   c2p[i, j] = q_i . Kr[idx],  Kr = W_k R + b_k      (content -> position)
//   p2c[i, j] = k_j . Qr[idx],  Qr = W_q R + b_q      (position -> content; HF's -r index,
//                                                      transposed, is this same idx)
//   score[i, j] = (q_i . k_j + c2p + p2c) / sqrt(3 Dh)
// R = LayerNorm(rel_embeddings), one (2S, D) table and LayerNorm shared by all layers.
// share_att_key (default, as DeBERTa-v3): W_k, W_q are the layer's own key and query
// projections; otherwise each layer owns pos_key_proj and pos_query_proj.
// The log buckets keep |r| <= S/2 exact and extend to max_relative_positions logarithmically;
// the clamp makes every longer distance share the last bucket.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/encodings/relative.h"
#include "core/config/options.h"

namespace pelab {

// make_log_bucket_position: relative positions (int64, any shape) -> buckets (int64, same shape).
torch::Tensor deberta_log_bucket(const torch::Tensor& relative, int64_t bucket_size, int64_t max_position);

class DebertaImpl : public PositionEncodingImpl {
 public:
  DebertaImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // c2p as content-position, p2c as position-content
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  double attention_scale() const override;
  // rows are relative buckets -span .. span - 1
  std::vector<PositionTable> position_tables() const override { return {{"rel_embeddings", "bucket", -span_}}; }
  // contiguous positions: Kr as the query rows (c2p), Qr as the key rows (p2c)
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // Row of the relative table of each offset (query - key), any shape, in [0, 2S).
  torch::Tensor table_row(const torch::Tensor& offsets) const;
  torch::Tensor table_index(const Positions& positions) const { return table_row(relative_offsets(positions)); }
  // Kr and Qr of table rows (W), each distinct row once: key, query (H, U, Dh) for the U
  // distinct rows in ascending order, and the position of each row among them, run (W):
  // Kr of rows[w] is key[:, run[w]]. Rows that never decrease (ascending offsets) make run
  // non-decreasing in steps of 0 or 1 (RelativeRows::runs).
  struct ProjectedRows {
    torch::Tensor key, query, run;
  };
  ProjectedRows projected_rows(const AttentionContext& attention, const torch::Tensor& rows);

 private:
  int64_t position_buckets_, max_relative_positions_, span_;
  bool share_att_key_;
  torch::Tensor rel_embeddings_;  // (2S, D)
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::ModuleList pos_key_proj_{nullptr}, pos_query_proj_{nullptr};  // per layer, unless shared
};

}  // namespace pelab
