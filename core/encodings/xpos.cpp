#include "core/encodings/xpos.h"

#include <cmath>

namespace pelab {

XposImpl::XposImpl(const EncodingContext& context, const OptionValues& options)
    : RotaryImpl(context, context.head_dim(), /*interleaved=*/true, options.get_float("base"),
                 RotaryExtrapolationOptions::from(options)),
      scale_base_(options.get_float("scale_base")) {
  TORCH_CHECK(context.causal, "xpos is defined for causal attention only (its scale grows for keys after the "
              "query); set model.causal: true");
}

std::string XposImpl::description() {
  return "xPos (Sun et al. 2022): RoPE with a per-pair exponential decay of q.k with distance; causal only";
}

std::vector<OptionSpec> XposImpl::options() {
  std::vector<OptionSpec> specs = {
      OptionSpec::real("base", 10000.0, "rotary wavelength base", 1.0, 1e12),
      OptionSpec::real("scale_base", 512.0, "distance over which the decay zeta^(d / scale_base) acts", 1.0, 1e12),
  };
  for (auto& spec : RotaryExtrapolationOptions::specs()) specs.push_back(spec);
  return specs;
}

torch::Tensor XposImpl::scale(const torch::Tensor& centred) const {
  const int64_t Dh = context_.head_dim();
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(centred.device());
  auto zeta = (torch::arange(0, Dh, 2, f64) + 0.4 * Dh) / (1.4 * Dh);            // (Dh/2)
  auto exponent = centred.to(torch::kFloat64).unsqueeze(-1) / scale_base_;       // (B'|1, T, 1)
  return torch::pow(zeta, exponent).to(torch::kFloat32);                         // (B'|1, T, Dh/2)
}

std::pair<torch::Tensor, torch::Tensor> XposImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                         const AttentionContext& attention) {
  const auto query = collapse_broadcast_rows(attention.positions.query);
  const auto key = collapse_broadcast_rows(attention.positions.key);
  // real positions (continuous samplers): L = floor(largest) + 1
  const int64_t length = static_cast<int64_t>(std::floor(key.max().item<double>())) + 1;
  const int64_t centre = (length + 1) / 2;  // torchscale: min_pos = -length // 2 = -ceil(length / 2)
  // one factor per pair, applied to both of its features: (B'|1, 1, T, Dh)
  auto per_feature = [&](const torch::Tensor& s) { return s.repeat_interleave(2, -1).unsqueeze(1).to(q.dtype()); };
  auto q_scale = per_feature(scale(query - centre));
  auto k_scale = per_feature(scale(key - centre)).reciprocal();
  return {apply(q, attention.positions.query) * q_scale, apply(k, attention.positions.key) * k_scale};
}

}  // namespace pelab
