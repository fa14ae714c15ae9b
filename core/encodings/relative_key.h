// `relative_key`: HuggingFace BERT position_embedding_type="relative_key"
// (huggingface/transformers src/transformers/models/bert/modeling_bert.py, BertSelfAttention;
// Shaw et al. 2018 / Huang et al. 2020 "Improve Transformer Models with Better Relative
// Position Embeddings"). Sign: distance = query - key (pelab's internal convention).
// Each layer owns one table of distance embeddings E, shared by its heads:
//   score[i, j] = (q_i . k_j + q_i . E[d(i, j)]) / sqrt(Dh)
// with d = distance + max_positions - 1 over a table of 2 * max_positions - 1 rows (HF); a
// distance beyond the table is an error naming the option. `clip: k` (k > 0) instead clips
// distances to [-k, k] over a table of 2k + 1 rows, so any test length works.
// `relative_key_query` (relative_key_query.h) adds the key term k_j . E[d(i, j)].
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/encodings/relative.h"
#include "core/config/options.h"

namespace pelab {

class RelativeKeyImpl : public PositionEncodingImpl {
 public:
  RelativeKeyImpl(const EncodingContext& context, const OptionValues& options, bool key_term = false);
  static std::string description();
  static std::vector<OptionSpec> options();

  void check_positions(const Positions& positions) const override;
  // one (offsets) table per layer; row 0 is offset -clip, or -(max_positions - 1) unclipped
  std::vector<PositionTable> position_tables() const override;
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // q . E as content-position, relative_key_query's k . E as position-content
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  // contiguous positions: the table rows of the offsets -(T - 1) .. T - 1 as the query
  // (and for relative_key_query the key) rows of the fused attention
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // Table row of each offset (query - key), any shape.
  torch::Tensor table_row(const torch::Tensor& offsets) const;
  // Table row of each (query, key): (B'|1, Tq, Tk) int64.
  torch::Tensor table_index(const Positions& positions) const { return table_row(relative_offsets(positions)); }
  const torch::Tensor& table(int64_t layer) const { return tables_[layer]; }

 private:
  int64_t max_positions_, clip_;
  bool key_term_;
  std::vector<torch::Tensor> tables_;  // per layer: (2 max_positions - 1 | 2 clip + 1, Dh)
};

}  // namespace pelab
