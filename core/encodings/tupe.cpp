#include "core/encodings/tupe.h"

#include <algorithm>
#include <cmath>

#include "core/encodings/t5_bias.h"

namespace pelab {

TupeImpl::TupeImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context),
      max_positions_(options.get_int("max_positions")),
      num_buckets_(options.get_int("num_buckets")),
      max_distance_(options.get_int("max_distance")),
      per_layer_(options.get_bool("per_layer")) {
  const int64_t D = context.d_model;
  const double init_std = options.get_float("init_std");
  table_ = register_parameter("table", torch::randn({max_positions_, D}) * init_std);
  norm_ = register_module("table_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
  projections_ = register_module("projection", torch::nn::ModuleList());
  for (int64_t l = 0; l < (per_layer_ ? context.num_layers : 1); ++l)  // encoding_mix: a placeholder for a block
    projections_->push_back(linear_if(!per_layer_ || context.serves(l), D, 2 * context.attention_width()));  //   of the other scheme
  if (options.get_bool("relative")) {
    check_t5_max_distance("tupe", context.causal, num_buckets_, max_distance_);
    relative_bias_ = register_parameter("relative_attention_bias",
                                        torch::randn({num_buckets_, context.num_heads}) * init_std);
  }
}

std::string TupeImpl::description() {
  return "TUPE (Ke et al. 2021): untied position term (p_i U_q)(p_j U_k)^T / sqrt(2d), optional T5 buckets (TUPE-R)";
}

std::vector<OptionSpec> TupeImpl::options() {
  return {
      OptionSpec::integer("max_positions", 512, "rows of the position table: the largest position + 1", 1, 1 << 24),
      OptionSpec::boolean("per_layer", false, "a projection U_q, U_k per block (the reference shares one)"),
      OptionSpec::boolean("relative", false, "TUPE-R: add T5's bucketed bias of key - query"),
      OptionSpec::integer("num_buckets", 32, "TUPE-R buckets (bidirectional: half per direction)", 4, 1 << 16),
      OptionSpec::integer("max_distance", 128, "TUPE-R: distances at or beyond this share the last bucket", 2,
                          1 << 24),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial tables (BERT: 0.02)", 0.0, 10.0),
  };
}

void TupeImpl::check_positions(const Positions& positions) const {
  if (positions.query.numel() == 0) return;
  const PositionBounds b = position_bounds(positions);
  const int64_t smallest = std::min(b.query_min, b.key_min), largest = std::max(b.query_max, b.key_max);
  TORCH_CHECK(smallest >= 0, "tupe: negative positions");
  TORCH_CHECK(largest < max_positions_, "tupe: position ", largest, " does not fit the table of max_positions = ",
              max_positions_, " rows; raise encoding.max_positions to at least ", largest + 1,
              " or evaluate shorter lengths");
}

double TupeImpl::attention_scale() const { return 1.0 / std::sqrt(2.0 * context_.head_dim()); }

std::vector<PositionTable> TupeImpl::position_tables() const {
  std::vector<PositionTable> tables = {{"table", "position", 0}};
  if (relative_bias_.defined()) tables.push_back({"relative_attention_bias", "bucket", 0});
  return tables;
}

torch::Tensor TupeImpl::projected(const torch::Tensor& positions, int64_t layer, int64_t half) {
  const int64_t A = context_.attention_width(), H = context_.num_heads, Dh = context_.head_dim();
  const auto rows = norm_->forward(table_.index_select(0, positions.reshape(-1)));  // (B' T, D)
  const auto& projection = projections_[per_layer_ ? layer : 0]->as<torch::nn::Linear>();
  const auto u = torch::nn::functional::linear(rows, projection->weight.narrow(0, half * A, A),
                                               projection->bias.narrow(0, half * A, A));  // (B' T, H Dh)
  return u.view({positions.size(0), positions.size(1), H, Dh}).permute({0, 2, 1, 3});
}

torch::Tensor TupeImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const auto terms = score_terms(q, k, attention);
  return (terms.size() == 2 ? terms[0].value + terms[1].value : terms[0].value).to(q.scalar_type());
}

std::vector<ScoreTerm> TupeImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                             const AttentionContext& attention) {
  const auto query = collapse_broadcast_rows(attention.positions.query);  // (B'|1, Tq)
  const auto key = collapse_broadcast_rows(attention.positions.key);      // (B'|1, Tk)
  std::vector<ScoreTerm> terms = {
      {"position-position", torch::matmul(projected(query, attention.layer, 0) * attention_scale(),
                                          projected(key, attention.layer, 1).transpose(-2, -1))}};  // (B'|1, H, Tq, Tk)
  if (relative_bias_.defined())
    terms.push_back({"relative bias", t5_bucket_bias(relative_bias_, attention.positions, context_.causal,
                                                     num_buckets_, max_distance_)});
  return terms;
}

}  // namespace pelab
