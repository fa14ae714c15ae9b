#include "core/encodings/pope.h"

#include <cmath>

namespace pelab {

PopeImpl::PopeImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), base_(options.get_float("base")) {
  auto bias = torch::zeros({context.num_heads, context.head_dim()});
  if (options.get_string("bias_init") == "uniform") bias.uniform_(-2.0 * M_PI, 0.0);
  key_bias_ = register_parameter("key_bias", bias);
}

std::string PopeImpl::description() {
  return "PoPE (Gopalakrishnan et al. 2025): softplus(q), softplus(k) as magnitudes, position as phase p base^(-c/Dh), "
         "a learned key phase bias";
}

std::vector<OptionSpec> PopeImpl::options() {
  return {OptionSpec::real("base", 10000.0, "frequencies base^(-c/Dh), c = 0 .. Dh - 1", 1.0, 1e12),
          OptionSpec::choice("bias_init", "zeros", {"zeros", "uniform"},
                             "the key phase bias at initialization: 0, or uniform in [-2 pi, 0] (x-transformers "
                             "polar_bias_uniform_init)")};
}

std::pair<torch::Tensor, torch::Tensor> PopeImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                         const AttentionContext& attention) {
  // q, k: (B, H, T, Dh) -> (B, H, T, 2 Dh), in float32 (the reference turns autocast off)
  const int64_t Dh = q.size(-1);
  const auto options = torch::TensorOptions(torch::kFloat32).device(q.device());
  const auto frequencies = torch::pow(base_, -torch::arange(Dh, options) / static_cast<double>(Dh));  // (Dh)
  auto phases = [&](const torch::Tensor& positions) {  // (B|1, T) -> (B|1, 1, T, Dh)
    return (collapse_broadcast_rows(positions).to(torch::kFloat32).unsqueeze(-1) * frequencies).unsqueeze(1);
  };
  const auto query_phase = phases(attention.positions.query);
  const auto key_phase = phases(attention.positions.key) +
                         key_bias_.clamp(-2.0 * M_PI, 0.0).to(options).view({1, -1, 1, Dh});  // (B|1, H, T, Dh)
  auto polar = [](const torch::Tensor& x, const torch::Tensor& phase) {
    const auto magnitude = torch::softplus(x.to(torch::kFloat32));
    return torch::cat({magnitude * phase.cos(), magnitude * phase.sin()}, -1);
  };
  return {polar(q, query_phase).to(q.scalar_type()), polar(k, key_phase).to(k.scalar_type())};
}

}  // namespace pelab
