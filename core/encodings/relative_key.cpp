#include "core/encodings/relative_key.h"

#include <algorithm>

#include "core/encodings/relative.h"

namespace pelab {

RelativeKeyImpl::RelativeKeyImpl(const EncodingContext& context, const OptionValues& options, bool key_term)
    : PositionEncodingImpl(context),
      max_positions_(options.get_int("max_positions")),
      clip_(options.get_int("clip")),
      key_term_(key_term) {
  const int64_t rows = clip_ > 0 ? 2 * clip_ + 1 : 2 * max_positions_ - 1;
  const double init_std = options.get_float("init_std");
  for (int64_t l = 0; l < context.num_layers; ++l)
    tables_.push_back(context.serves(l) ? register_parameter("distance_embedding_" + std::to_string(l),
                                                             torch::randn({rows, context.head_dim()}) * init_std)
                                        : torch::Tensor());
}

std::vector<PositionTable> RelativeKeyImpl::position_tables() const {
  std::vector<PositionTable> tables;
  for (int64_t l = 0; l < context().num_layers; ++l)
    if (context().serves(l)) tables.push_back({"distance_embedding_" + std::to_string(l), "offset", clip_ > 0 ? -clip_ : 1 - max_positions_});
  return tables;
}

std::string RelativeKeyImpl::description() {
  return "HF BERT relative_key: q . E[query - key] per layer (Huang et al. 2020), optional clipping";
}

std::vector<OptionSpec> RelativeKeyImpl::options() {
  return {
      OptionSpec::integer("max_positions", 512, "HF max_position_embeddings: distances up to max_positions - 1",
                          1, 1 << 20),
      OptionSpec::integer("clip", 0, "clip distances to [-clip, clip] (0: no clipping, HF semantics)", 0, 1 << 20),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial tables (BERT: 0.02)", 0.0, 10.0),
  };
}

void RelativeKeyImpl::check_positions(const Positions& positions) const {
  if (clip_ > 0 || positions.query.numel() == 0) return;
  const PositionBounds b = position_bounds(positions);
  int64_t span = std::max(b.query_max - b.key_min, b.key_max - b.query_min);
  // the bounded search (a GPU) takes the rows of every offset the sampler's range allows
  const PositionFacts* facts = positions.known_facts();
  const bool every_offset = facts && !facts->contiguous && offset_search_for(positions) == OffsetSearch::bounded &&
                            facts->offset_bound > span;
  if (every_offset) span = facts->offset_bound;
  const std::string scheme = context_.scheme.empty() ? "relative_key" : context_.scheme;  // or relative_key_query
  TORCH_CHECK(span <= max_positions_ - 1, scheme, ": distance ", span,
              every_offset ? " (every offset of the sampler's positions.max_length)" : "",
              " is beyond the table of max_positions = ", max_positions_, " (distances up to ", max_positions_ - 1,
              "); raise encoding.max_positions or set encoding.clip (e.g. clip: 64) to clip distances");
}

torch::Tensor RelativeKeyImpl::table_row(const torch::Tensor& offsets) const {
  if (clip_ > 0) return offsets.clamp(-clip_, clip_) + clip_;
  return offsets + (max_positions_ - 1);
}

RelativeRows RelativeKeyImpl::relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                            const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  if (!geometry.contiguous()) return {};
  RelativeRows terms;
  if (clip_ > 0 && !key_term_) {  // the 2 clip + 1 rows; the kernel spreads the end rows over farther keys
    terms.clip = clip_;
    const auto offsets = torch::arange(-clip_, clip_ + 1, geometry.offsets().options());
    terms.query = tables_[attention.layer].index_select(0, table_row(offsets));  // (2 clip + 1, Dh)
    return terms;
  }
  terms.query = tables_[attention.layer].index_select(0, table_row(geometry.offsets()));  // (2T - 1, Dh)
  if (key_term_) terms.key = terms.query;  // the same rows: their gradients add up
  return terms;
}

torch::Tensor RelativeKeyImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                          const AttentionContext& attention) {
  const auto terms = score_terms(q, k, attention);
  return key_term_ ? terms[0].value + terms[1].value : terms[0].value;
}

std::vector<ScoreTerm> RelativeKeyImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                    const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto rows = tables_[attention.layer].index_select(0, table_row(geometry.offsets()));  // (W, Dh)
  // HF adds these before dividing by sqrt(Dh): scale q and k (T x Dh) rather than the (T, T) sum
  const double scale = attention_scale();
  std::vector<ScoreTerm> terms = {{"content-position", geometry.query_scores(q * scale, rows)}};  // (B, H, Tq, Tk)
  if (key_term_) terms.push_back({"position-content", geometry.key_scores(k * scale, rows)});
  return terms;
}

}  // namespace pelab
