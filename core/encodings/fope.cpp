#include "core/encodings/fope.h"

#include <cmath>

namespace pelab {

namespace {

// (H, K, P): the strided identity (pair d on frequency d * ceil(K / P)) plus N(0, sigma^2)
torch::Tensor initial_coefficients(int64_t heads, int64_t kept, int64_t pairs, double sigma) {
  auto coefficients = torch::randn({heads, kept, pairs}) * sigma;
  const int64_t step = (kept + pairs - 1) / std::max<int64_t>(pairs, 1);
  for (int64_t d = 0; d < pairs; ++d)
    if (d * step < kept) coefficients.select(2, d).select(1, d * step).add_(1.0);
  return coefficients;
}

}  // namespace

FopeImpl::FopeImpl(const EncodingContext& context, const OptionValues& options) : PositionEncodingImpl(context) {
  const int64_t Dh = context.head_dim();
  TORCH_CHECK(Dh % 2 == 0, "fope: the head size ", Dh, " must be even (pairs are rotated)");
  const double base = options.get_float("base"), floor = 2.0 * M_PI / options.get_float("max_length");
  std::vector<double> kept;
  for (int64_t i = 0; i < Dh / 2; ++i) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(Dh));
    if (theta >= floor) kept.push_back(theta);  // the others are clipped to zero
  }
  const int64_t K = static_cast<int64_t>(kept.size()), P = std::min<int64_t>(K, Dh / 4);
  // from the options alone: not a buffer (a run file stores float32; these are float64)
  frequencies_ = torch::tensor(kept, torch::kFloat64).reshape({K});
  const double sigma = options.get_float("sigma");
  auto cos_init = initial_coefficients(context.num_heads, K, P, sigma);
  auto sin_init = initial_coefficients(context.num_heads, K, P, sigma);
  if (options.get_bool("learn_coefficients")) {
    cos_coefficients_ = register_parameter("cos_coefficients", cos_init);
    sin_coefficients_ = register_parameter("sin_coefficients", sin_init);
  } else {
    cos_coefficients_ = register_buffer("cos_coefficients", cos_init);
    sin_coefficients_ = register_buffer("sin_coefficients", sin_init);
  }
}

std::string FopeImpl::description() {
  return "FoPE (Hua et al. 2024): RoPE with each pair's rotation a Fourier series of the frequencies the "
         "training length covers, the lower ones clipped to zero";
}

std::vector<OptionSpec> FopeImpl::options() {
  return {
      OptionSpec::real("base", 10000.0, "RoPE's wavelength base", 1.0, 1e12),
      OptionSpec::real("max_length", 128.0,
                       "the training length in tokens: frequencies below 2 pi / max_length are clipped to zero", 1.0,
                       1e9),
      OptionSpec::real("sigma", 0.3, "std of the coefficients' random part (the reference's gain: 0.3 at 60M)", 0.0,
                       10.0),
      OptionSpec::boolean("learn_coefficients", false, "train the Fourier coefficients (else fixed at their start)"),
  };
}

std::pair<torch::Tensor, torch::Tensor> FopeImpl::tables(const torch::Tensor& positions) const {
  const int64_t half = context().head_dim() / 2, P = cos_coefficients_.size(2);
  const auto angles = positions.to(torch::kFloat64).unsqueeze(-1) * frequencies_.to(positions.device());  // (B', T, K)
  const auto cos_basis = angles.cos().to(torch::kFloat32), sin_basis = angles.sin().to(torch::kFloat32);
  auto series = [&](const torch::Tensor& basis, const torch::Tensor& coefficients) {  // -> (B', H, T, P)
    return torch::einsum("btk,hkp->bhtp", {basis, coefficients.to(basis.device(), torch::kFloat32)});
  };
  auto cos = series(cos_basis, cos_coefficients_), sin = series(sin_basis, sin_coefficients_);
  if (P < half) {  // the pairs at frequency zero: cos 1, sin 0
    auto shape = cos.sizes().vec();
    shape.back() = half - P;
    cos = torch::cat({cos, torch::ones(shape, cos.options())}, -1);
    sin = torch::cat({sin, torch::zeros(shape, sin.options())}, -1);
  }
  return {cos, sin};
}

torch::Tensor FopeImpl::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  const int64_t half = x.size(-1) / 2;
  auto [cos, sin] = tables(positions);  // (B'|1, H, T, Dh/2)
  cos = cos.to(x.scalar_type()), sin = sin.to(x.scalar_type());
  const auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

std::pair<torch::Tensor, torch::Tensor> FopeImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                         const AttentionContext& attention) {
  return {apply(q, attention.positions.query), apply(k, attention.positions.key)};
}

}  // namespace pelab
