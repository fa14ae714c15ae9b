#include "core/encodings/deberta.h"

#include <cmath>

#include "core/encodings/deberta_buckets.h"
#include "core/encodings/relative.h"

namespace pelab {

torch::Tensor deberta_log_bucket(const torch::Tensor& relative, int64_t bucket_size, int64_t max_position) {
  const int64_t mid = bucket_size / 2;
  auto sign = relative.sign();
  auto inside = (relative < mid) & (relative > -mid);
  auto abs_pos = torch::where(inside, torch::full_like(relative, mid - 1), relative.abs()).to(torch::kFloat64);
  auto log_pos = torch::ceil(torch::log(abs_pos / mid) / std::log(double(max_position - 1) / mid) * (mid - 1)) + mid;
  auto bucket = torch::where(abs_pos <= mid, relative.to(torch::kFloat64), log_pos * sign.to(torch::kFloat64));
  return bucket.to(torch::kInt64);
}

DebertaImpl::DebertaImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context),
      position_buckets_(options.get_int("position_buckets")),
      max_relative_positions_(options.get_int("max_relative_positions")),
      span_(position_buckets_ > 0 ? position_buckets_ : max_relative_positions_),
      share_att_key_(options.get_bool("share_att_key")) {
  const std::string problem = deberta_bucket_settings_problem(position_buckets_, max_relative_positions_);
  TORCH_CHECK(problem.empty(), "deberta: ", problem);
  const int64_t D = context.d_model;
  rel_embeddings_ = register_parameter("rel_embeddings", torch::randn({2 * span_, D}) * options.get_float("init_std"));
  norm_ = register_module("rel_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D}).eps(1e-7)));
  if (!share_att_key_) {
    pos_key_proj_ = register_module("pos_key_proj", torch::nn::ModuleList());
    pos_query_proj_ = register_module("pos_query_proj", torch::nn::ModuleList());
    for (int64_t l = 0; l < context.num_layers; ++l) {  // a block not served: a placeholder without parameters
      pos_key_proj_->push_back(linear_if(context.serves(l), D, context.attention_width()));
      pos_query_proj_->push_back(linear_if(context.serves(l), D, context.attention_width()));
    }
  }
}

std::string DebertaImpl::description() {
  return "DeBERTa disentangled attention: c2p + p2c over log-bucketed query - key, shared table, sqrt(3d)";
}

std::vector<OptionSpec> DebertaImpl::options() {
  return {
      OptionSpec::integer("position_buckets", 256, "S: log buckets, at least 2 (0: exact distances up to max_relative_positions)",
                          0, 1 << 16),
      OptionSpec::integer("max_relative_positions", 512, "distance the log buckets reach", 2, 1 << 24),
      OptionSpec::boolean("share_att_key", true, "project R with the layer's own W_q, W_k (DeBERTa-v3)"),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial relative table", 0.0, 10.0),
  };
}

double DebertaImpl::attention_scale() const { return 1.0 / std::sqrt(3.0 * context_.head_dim()); }

torch::Tensor DebertaImpl::table_row(const torch::Tensor& offsets) const {
  auto relative = offsets;  // query - key
  if (position_buckets_ > 0) relative = deberta_log_bucket(relative, position_buckets_, max_relative_positions_);
  return (relative + span_).clamp(0, 2 * span_ - 1);
}

DebertaImpl::ProjectedRows DebertaImpl::projected_rows(const AttentionContext& attention, const torch::Tensor& rows) {
  const int64_t A = context_.attention_width(), H = context_.num_heads, Dh = context_.head_dim();
  // Beyond the exact distances the log buckets repeat rows (at T = 512, 2T - 1 = 1023
  // offsets use 511 rows): LayerNorm and project each distinct row once.
  torch::Tensor distinct, run;  // (U), (W)
  std::tie(distinct, run) = at::_unique(rows, /*sorted=*/true, /*return_inverse=*/true);
  auto R = norm_->forward(rel_embeddings_.index_select(0, distinct));  // (U, D); LayerNorm is per row
  torch::Tensor Kr, Qr;
  if (share_att_key_) {
    Qr = torch::nn::functional::linear(R, attention.qkv_weight.narrow(0, 0, A), attention.qkv_bias.narrow(0, 0, A));
    Kr = torch::nn::functional::linear(R, attention.qkv_weight.narrow(0, A, A), attention.qkv_bias.narrow(0, A, A));
  } else {
    Kr = pos_key_proj_[attention.layer]->as<torch::nn::Linear>()->forward(R);
    Qr = pos_query_proj_[attention.layer]->as<torch::nn::Linear>()->forward(R);
  }
  auto heads = [&](const torch::Tensor& x) { return x.view({distinct.size(0), H, Dh}).permute({1, 0, 2}); };  // (H, U, Dh)
  return {heads(Kr), heads(Qr), run};
}

torch::Tensor DebertaImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const auto terms = score_terms(q, k, attention);
  return terms[0].value + terms[1].value;  // c2p + p2c
}

std::vector<ScoreTerm> DebertaImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  const auto projected = projected_rows(attention, table_row(geometry.offsets()));
  auto per_offset = [&](const torch::Tensor& x) { return x.index_select(1, projected.run); };  // (H, W, Dh)
  const double scale = attention_scale();  // on q and k (T x Dh), not on the (T, T) terms
  return {{"content-position", geometry.query_scores(q * scale, per_offset(projected.key))},   // c2p
          {"position-content", geometry.key_scores(k * scale, per_offset(projected.query))}};  // p2c
}

RelativeRows DebertaImpl::relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                        const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  if (!geometry.contiguous()) return {};
  // offsets ascending -> table rows non-decreasing: the distinct rows are the runs (none
  // repeats up to position_buckets / 2: then one row per offset, no runs to pass)
  const auto offsets = geometry.offsets();
  const auto projected = projected_rows(attention, table_row(offsets));
  RelativeRows terms;
  terms.query = projected.key;  // (H, U, Dh)
  terms.key = projected.query;
  if (projected.key.size(1) < offsets.numel()) terms.runs = projected.run;  // (2T - 1)
  return terms;
}

}  // namespace pelab
