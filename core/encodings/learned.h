// `learned`: a trained absolute table of `max_positions` rows, as BERT's
// position_embeddings (huggingface/transformers modeling_bert.py BertEmbeddings), initialised
// N(0, init_std^2) like BERT (0.02). A position at or beyond the table is a clear error
// naming the position, the table size and the option to raise. Reads `Positions::query`.
// `inject: per_layer` gives every block a table of its own (table_0, table_1, ...), added
// before it: the re-injection question with the tables untied.
#pragma once

#include "core/encodings/additive.h"

namespace pelab {

class LearnedPositionEncodingImpl : public AdditivePositionEncodingImpl {
 public:
  LearnedPositionEncodingImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  void check_positions(const Positions& positions) const override;
  // positions: (B, T) int64 -> (B, T, D)
  torch::Tensor position_vectors(const torch::Tensor& positions, int64_t layer) override;

  std::vector<PositionTable> position_tables() const override;

  int64_t max_positions() const { return max_positions_; }

 private:
  int64_t max_positions_;
  std::vector<torch::Tensor> tables_;  // (max_positions, D): one, or one per block (per_layer)
};

}  // namespace pelab
