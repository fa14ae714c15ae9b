#include "core/encodings/sinusoidal.h"

namespace pelab {

SinusoidalPositionEncodingImpl::SinusoidalPositionEncodingImpl(const EncodingContext& context,
                                                               const OptionValues& options)
    : AdditivePositionEncodingImpl(context, options),
      layout_(options.get_string("layout")),
      base_(options.get_float("base")) {
  TORCH_CHECK(context.d_model % 2 == 0, "sinusoidal: d_model must be even, got ", context.d_model);
  if (inject() == "every_layer_scaled") layer_scale_ = register_parameter("layer_scale", torch::ones({context.num_layers}));
  TORCH_CHECK(layout_ != "concatenated_t2t" || context.d_model >= 4,
              "sinusoidal: layout concatenated_t2t needs d_model >= 4, got ", context.d_model);
}

std::string SinusoidalPositionEncodingImpl::description() {
  return "fixed sin/cos of Vaswani et al. 2017, added to the input (or before every block)";
}

std::vector<OptionSpec> SinusoidalPositionEncodingImpl::options() {
  return {
      OptionSpec::choice("layout", "interleaved", {"interleaved", "concatenated", "concatenated_t2t"},
                         "interleaved sin/cos pairs (Vaswani); [sin | cos] halves (DeepMind); or [sin | cos] "
                         "with tensor2tensor frequencies base^(-i/(D/2-1))"),
      OptionSpec::real("base", 10000.0, "wavelength base", 1.0, 1e12),
      inject_option({"every_layer_scaled"}, ", or before every block times a learned scale per block "
                    "(every_layer_scaled, starting at 1)"),
  };
}

torch::Tensor SinusoidalPositionEncodingImpl::position_vectors(const torch::Tensor& positions, int64_t layer) {
  const auto vectors = sinusoid_table(positions, context_.d_model, base_, layout_);
  if (!layer_scale_.defined()) return vectors;
  return vectors * layer_scale_[layer];
}

torch::Tensor sinusoid_table(const torch::Tensor& values, int64_t dim, double base, const std::string& layout) {
  const int64_t half = dim / 2;
  // Angles in float64: positions sampled from a large range (randomized positions) keep
  // their precision; the result is cast to float32.
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(values.device());
  auto i = torch::arange(half, f64);
  const double denominator = layout == "concatenated_t2t" ? static_cast<double>(half - 1) : static_cast<double>(half);
  auto inverse_frequency = torch::pow(base, -i / denominator);                 // (D/2)
  auto angles = values.to(torch::kFloat64).unsqueeze(-1) * inverse_frequency;  // (..., D/2)
  torch::Tensor table;
  if (layout == "interleaved") {
    table = torch::stack({angles.sin(), angles.cos()}, -1).flatten(-2);  // s0 c0 s1 c1 ...
  } else {
    table = torch::cat({angles.sin(), angles.cos()}, -1);  // s0 s1 ... c0 c1 ...
  }
  return table.to(torch::kFloat32);
}

}  // namespace pelab
