#include "core/encodings/t5_bias.h"

#include <cmath>

#include "core/encodings/relative.h"

namespace pelab {

torch::Tensor t5_relative_bucket(const torch::Tensor& key_minus_query, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance) {
  torch::Tensor bucket = torch::zeros_like(key_minus_query);
  torch::Tensor n;
  if (bidirectional) {
    num_buckets /= 2;
    bucket = bucket + (key_minus_query > 0).to(torch::kInt64) * num_buckets;  // keys after the query
    n = key_minus_query.abs();
  } else {
    n = (-key_minus_query).clamp_min(0);  // future keys -> 0
  }
  const int64_t max_exact = num_buckets / 2;
  // log-spaced buckets from max_exact to max_distance; clamp n >= 1 so log never sees 0
  auto n_float = n.clamp_min(1).to(torch::kFloat32);
  auto large = max_exact + (torch::log(n_float / max_exact) / std::log(static_cast<double>(max_distance) / max_exact) *
                            (num_buckets - max_exact))
                               .to(torch::kInt64);
  large = large.clamp_max(num_buckets - 1);
  return bucket + torch::where(n < max_exact, n, large);
}

void check_t5_max_distance(const std::string& scheme, bool causal, int64_t num_buckets, int64_t max_distance) {
  const int64_t exact = causal ? num_buckets / 2 : num_buckets / 4;
  TORCH_CHECK(max_distance > exact, scheme, ": max_distance (", max_distance,
              ") must exceed the range of exact buckets, ", exact);
}

torch::Tensor t5_bucket_bias(const torch::Tensor& table, const Positions& positions, bool causal,
                             int64_t num_buckets, int64_t max_distance, int64_t clamp_distance) {
  const RelativeGeometry geometry(positions);
  auto offsets = geometry.offsets();  // (W) query - key
  if (clamp_distance > 0) offsets = offsets.clamp(-clamp_distance, clamp_distance);
  auto buckets = t5_relative_bucket(-offsets, !causal, num_buckets, max_distance);  // (W)
  return geometry.bias(table.t().index_select(1, buckets));  // (H, W) -> (B'|1, H, Tq, Tk)
}

T5BiasImpl::T5BiasImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context),
      num_buckets_(options.get_int("num_buckets")),
      max_distance_(options.get_int("max_distance")),
      scaled_(options.get_string("scale") == "sqrt") {
  check_t5_max_distance("t5_bias", context.causal, num_buckets_, max_distance_);
  // HF: N(0, (factor * d_model)^-1/2) with factor 1
  table_ = register_parameter("relative_attention_bias",
                              torch::randn({num_buckets_, context.num_heads}) / std::sqrt(double(context.d_model)));
}

std::string T5BiasImpl::description() {
  return "T5 relative attention bias: log buckets of key - query, one table shared by all layers";
}

std::vector<OptionSpec> T5BiasImpl::options() {
  return {
      OptionSpec::integer("num_buckets", 32, "buckets (bidirectional: half per direction)", 4, 1 << 16),
      OptionSpec::integer("max_distance", 128, "distances at or beyond this share the last bucket", 2, 1 << 24),
      OptionSpec::choice("scale", "sqrt", {"sqrt", "none"},
                         "scores q.k scaled by 1/sqrt(Dh) (pelab default) or unscaled (T5)"),
  };
}

void T5BiasImpl::set_extrapolation(const Extrapolation& extrapolation) {
  TORCH_CHECK(extrapolation.method == "none" || extrapolation.method == "clamp", "t5_bias: extrapolation method '",
              extrapolation.method, "' is not one of t5_bias's (none, clamp)");
  if (extrapolation.method == "none") {
    clamp_distance_ = 0;
    return;
  }
  TORCH_CHECK(extrapolation.training_length > 1, "t5_bias: clamp needs the training length in tokens");
  clamp_distance_ = extrapolation.training_length - 1;  // the longest offset training saw
}

double T5BiasImpl::attention_scale() const { return scaled_ ? PositionEncodingImpl::attention_scale() : 1.0; }

torch::Tensor T5BiasImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  return t5_bucket_bias(table_, attention.positions, context_.causal, num_buckets_, max_distance_, clamp_distance_);
}

}  // namespace pelab
