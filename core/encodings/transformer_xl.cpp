#include "core/encodings/transformer_xl.h"

#include "core/encodings/relative.h"
#include "core/encodings/sinusoidal.h"

namespace pelab {

TransformerXLImpl::TransformerXLImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), base_(options.get_float("base")) {
  TORCH_CHECK(context.d_model % 2 == 0, "transformer_xl: d_model must be even, got ", context.d_model);
  const double init_std = options.get_float("init_std");
  const int64_t H = context.num_heads, Dh = context.head_dim(), D = context.d_model;
  u_ = register_parameter("u", torch::randn({H, Dh}) * init_std);
  v_ = register_parameter("v", torch::randn({H, Dh}) * init_std);
  for (int64_t l = 0; l < context.num_layers; ++l)
    projection_.push_back(context.serves(l) ? register_parameter("r_projection_" + std::to_string(l),
                                                                 torch::randn({context.attention_width(), D}) * init_std)
                                            : torch::Tensor());
}

std::string TransformerXLImpl::description() {
  return "Transformer-XL (Dai et al. 2019): sinusoidal R[query - key] projected per layer, global u and v";
}

std::vector<OptionSpec> TransformerXLImpl::options() {
  return {
      OptionSpec::real("base", 10000.0, "wavelength base of the sinusoid table R", 1.0, 1e12),
      OptionSpec::real("init_std", 0.02, "standard deviation of u, v and W_R (reference: 0.02)", 0.0, 10.0),
  };
}

torch::Tensor TransformerXLImpl::projected_relative_table(int64_t layer, const torch::Tensor& distances) const {
  const auto& W = projection_[layer];
  const int64_t count = distances.size(0);
  auto R = sinusoid_table(distances, context_.d_model, base_, "concatenated").to(W.dtype());  // (W, D)
  auto projected = torch::matmul(R, W.t());                                                     // (W, H Dh)
  return projected.view({count, context_.num_heads, context_.head_dim()}).permute({1, 0, 2});  // (H, W, Dh)
}

torch::Tensor TransformerXLImpl::content_bias_term(const torch::Tensor& k) const {
  const int64_t H = context_.num_heads, Dh = context_.head_dim();
  return torch::matmul(k, u_.view({1, H, Dh, 1}) * attention_scale()).transpose(-2, -1);
}

torch::Tensor TransformerXLImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                            const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto rows = projected_relative_table(attention.layer, geometry.offsets());  // (H, W, Dh)
  const int64_t H = context_.num_heads, Dh = context_.head_dim();
  const double scale = attention_scale();  // the whole sum is scaled: scale the (T x Dh) factors
  auto position_terms = geometry.query_scores((q + v_.view({1, H, 1, Dh})) * scale, rows);  // (b) + (d)
  return position_terms + content_bias_term(k);
}

std::vector<ScoreTerm> TransformerXLImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                     const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto rows = projected_relative_table(attention.layer, geometry.offsets());  // (H, W, Dh)
  const int64_t H = context_.num_heads, Dh = context_.head_dim();
  const double scale = attention_scale();
  return {{"content-position", geometry.query_scores(q * scale, rows)},                                // (b)
          {"global content", content_bias_term(k)},                                                    // (c)
          {"global position", geometry.query_scores((v_.view({1, H, 1, Dh}) * scale).expand_as(q), rows)}};  // (d)
}

RelativeRows TransformerXLImpl::relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                              const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  if (!geometry.contiguous()) return {};
  const int64_t H = context_.num_heads, Dh = context_.head_dim();
  RelativeRows terms;
  terms.query = projected_relative_table(attention.layer, geometry.offsets());  // (H, 2T - 1, Dh)
  terms.offset_query = q + v_.view({1, H, 1, Dh});                               // (b) + (d)
  terms.bias = content_bias_term(k);                                             // (c)
  return terms;
}

}  // namespace pelab
