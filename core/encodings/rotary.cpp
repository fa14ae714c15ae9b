#include "core/encodings/rotary.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "core/config/config.h"

#include "core/encodings/heads_layout.h"

namespace pelab {

namespace {

// y = x rotated pair by pair: (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos) on the first R
// features of each head (pairs (2i, 2i + 1) interleaved, or (i, i + R/2) half split), the
// rest copied; direction -1 rotates back (the transpose: the gradient's rotation).
// x: (B, H, T, Dh) float32 view with unit last stride; cos, sin: contiguous (B|1, T, R/2)
// float32; y: (B, H, T, Dh) view with unit last stride, written.
void rotate_pairs(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, int64_t R,
                  bool interleaved, float direction, torch::Tensor& y) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), Dh = x.size(3), half = R / 2;
  const bool shared = cos.size(0) == 1;  // the same positions in every row of the batch
  const float *in = x.data_ptr<float>(), *cosines = cos.data_ptr<float>(), *sines = sin.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, B * T, 16, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t b = bt / T, t = bt % T, angle_row = ((shared ? 0 : b) * T + t) * half;
      const float *c = cosines + angle_row, *s = sines + angle_row;
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = in + b * x.stride(0) + h * x.stride(1) + t * x.stride(2);
        float* yi = out + b * y.stride(0) + h * y.stride(1) + t * y.stride(2);
        for (int64_t i = 0; i < half; ++i) {
          const int64_t first = interleaved ? 2 * i : i, second = interleaved ? 2 * i + 1 : i + half;
          const float x1 = xi[first], x2 = xi[second], sine = direction * s[i];
          yi[first] = x1 * c[i] - x2 * sine;
          yi[second] = x1 * sine + x2 * c[i];
        }
        for (int64_t d = R; d < Dh; ++d) yi[d] = xi[d];
      }
    }
  });
}

// The rotation of float32 CPU q or k as one pass forward and one backward (as LibTorch
// operations it is about ten elementwise passes each way: 0.2x a small-shape step's matrix
// products in a trace).
struct Rotation : torch::autograd::Function<Rotation> {
  // x: (B, H, T, Dh); cos, sin: (B|1, T, R/2) -> (B, H, T, Dh)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x_in,
                               const torch::Tensor& cos, const torch::Tensor& sin, int64_t R, bool interleaved) {
    const auto x = x_in.stride(-1) == 1 ? x_in : x_in.contiguous();
    auto y = empty_heads_last(x);  // what the fused attention reads best
    rotate_pairs(x, cos, sin, R, interleaved, 1.0f, y);
    context->save_for_backward({cos, sin});
    context->saved_data["R"] = R;
    context->saved_data["interleaved"] = interleaved;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto grad_y = gradients[0].stride(-1) == 1 ? gradients[0] : gradients[0].contiguous();
    auto grad_x = empty_heads_last(grad_y);
    rotate_pairs(grad_y, saved[0], saved[1], context->saved_data["R"].toInt(),
                 context->saved_data["interleaved"].toBool(), -1.0f, grad_x);
    return {grad_x, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::vector<OptionSpec> RotaryExtrapolationOptions::specs() {
  return {
      OptionSpec::real("yarn_beta_fast", 32.0, "eval.extrapolation yarn: pairs turning more than this often over the "
                       "training length are kept (YaRN's beta)", 1e-6, 1e12),
      OptionSpec::real("yarn_beta_slow", 1.0, "eval.extrapolation yarn: pairs turning less than this often are "
                       "interpolated (YaRN's alpha)", 1e-6, 1e12),
      OptionSpec::real("dynamic_ntk_factor", 2.0, "eval.extrapolation dynamic_ntk: alpha in base (alpha T / L - "
                       "alpha + 1)^(R / (R - 2)) (HF's rope_scaling factor)", 1.0, 1e6),
  };
}

RotaryExtrapolationOptions RotaryExtrapolationOptions::from(const OptionValues& options) {
  return {options.get_float("yarn_beta_fast"), options.get_float("yarn_beta_slow"),
          options.get_float("dynamic_ntk_factor")};
}

RotaryImpl::RotaryImpl(const EncodingContext& context, int64_t rotary_dims, bool interleaved, double base,
                       const RotaryExtrapolationOptions& extrapolation_options)
    : PositionEncodingImpl(context),
      rotary_dims_(rotary_dims),
      spectrum_dims_(rotary_dims),
      interleaved_(interleaved),
      base_(base),
      extrapolation_options_(extrapolation_options) {
  TORCH_CHECK(rotary_dims_ >= 2 && rotary_dims_ % 2 == 0 && rotary_dims_ <= context.head_dim(),
              "rotary: the rotated part of each head must be an even number of dimensions in [2, ",
              context.head_dim(), "], got ", rotary_dims_);
}

void RotaryImpl::set_spectrum(int64_t spectrum_dims, double min_turn_length) {
  TORCH_CHECK(spectrum_dims >= rotary_dims_, "rotary: the spectrum (", spectrum_dims, " dimensions) cannot be narrower "
              "than the rotated part (", rotary_dims_, ")");
  spectrum_dims_ = spectrum_dims;
  min_turn_length_ = min_turn_length;
}

void RotaryImpl::set_extrapolation(const Extrapolation& extrapolation) {
  const auto& method = extrapolation.method;
  const auto& methods = extrapolation_methods();
  TORCH_CHECK(std::find(methods.begin(), methods.end(), method) != methods.end(),
              "rotary: unknown extrapolation method '", method,
              "'; expected none, interpolation, ntk, yarn, dynamic_ntk, rerope or leaky_rerope");
  TORCH_CHECK(method != "clamp", "rotary: clamp is an extrapolation method of t5_bias only");
  TORCH_CHECK((method != "yarn" && method != "dynamic_ntk") || extrapolation.training_length > 0, "rotary: ",
              method, " needs the training length in tokens");
  TORCH_CHECK(supports_rerope_ || !is_rerope(method), "rotary: ", method,
              " is an extrapolation method of rope only");
  extrapolation_ = extrapolation;
  extrapolation_.factor = std::max(1.0, extrapolation.factor);  // only stretch beyond the training length
}

double RotaryImpl::rotation_magnitude() const {
  return extrapolation_.method == "yarn" ? 0.1 * std::log(extrapolation_.factor) + 1.0 : 1.0;
}

torch::Tensor RotaryImpl::inverse_frequencies(torch::Device device) const {
  const int64_t R = rotary_dims_, S = spectrum_dims_;
  const auto& method = extrapolation_.method;
  const double s = extrapolation_.factor, L = static_cast<double>(extrapolation_.training_length);
  double base = base_;
  if (method == "ntk") base *= std::pow(s, double(S) / double(S - 2));
  if (method == "dynamic_ntk") {
    const double alpha = extrapolation_options_.dynamic_ntk_factor;  // T / L = s (T clamped to at least L)
    base *= std::pow(alpha * s - (alpha - 1), double(S) / double(S - 2));
  }
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  const auto exponents = -torch::arange(0, R, 2, f64) / double(S);  // (R/2)
  auto theta = torch::pow(base, exponents);
  // HoPE: the pairs too slow to complete a turn within min_turn_length positions do not rotate,
  // judged on the trained frequencies (an NTK base at evaluation must not switch pairs off)
  if (min_turn_length_ > 0) theta = theta.masked_fill(torch::pow(base_, exponents) * min_turn_length_ < 2 * M_PI, 0.0);
  if (method == "interpolation") return theta / s;
  if (method != "yarn") return theta;
  // YaRN: pairs that turn often over the training length keep their frequency, slow ones are
  // interpolated, a linear ramp between (the correction range in pairs)
  auto correction_dim = [&](double rotations) {
    return S * std::log(L / (rotations * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(correction_dim(extrapolation_options_.yarn_beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(extrapolation_options_.yarn_beta_slow)), double(R - 1));
  if (high == low) high += 0.001;
  const auto ramp = ((torch::arange(R / 2, f64) - low) / (high - low)).clamp(0, 1);
  const auto kept = 1 - ramp;  // g_i
  return theta / s * (1 - kept) + theta * kept;
}

torch::Tensor RotaryImpl::angles(const torch::Tensor& positions) const {
  const auto p = positions.to(torch::kFloat64);
  return (p.unsqueeze(-1) * inverse_frequencies(positions.device())).to(torch::kFloat32);  // (B'|1, T, R/2)
}

std::pair<torch::Tensor, torch::Tensor> RotaryImpl::rotation_tables(const torch::Tensor& positions) const {
  const auto theta = angles(positions);
  const double magnitude = rotation_magnitude();
  return {theta.cos() * magnitude, theta.sin() * magnitude};
}

torch::Tensor RotaryImpl::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  const int64_t R = rotary_dims_, Dh = x.size(-1);
  const auto rows = collapse_broadcast_rows(positions);  // (B'|1, T)
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 4 && rows.size(-1) == x.size(2) &&
      (rows.size(0) == 1 || rows.size(0) == x.size(0))) {
    const auto [cos, sin] = rotation_tables(rows);  // (B'|1, T, R/2)
    return Rotation::apply(x, cos.contiguous(), sin.contiguous(), R, interleaved_);
  }
  // anything else (another device or dtype): LibTorch operations
  // angles in float32, rounded to x's dtype only as cosines and sines: in bfloat16 (autocast)
  // an angle of 2000 would be rounded by up to 4 radians
  const auto [cos_f32, sin_f32] = rotation_tables(rows);  // (B'|1, T, R/2)
  auto cos = cos_f32.unsqueeze(1).to(x.dtype()), sin = sin_f32.unsqueeze(1).to(x.dtype());  // (B'|1, 1, T, R/2)
  auto rotated = x.narrow(-1, 0, R);
  torch::Tensor x1, x2;
  if (interleaved_) {
    auto pairs = rotated.unflatten(-1, {R / 2, 2});  // (B, H, T, R/2, 2)
    x1 = pairs.select(-1, 0), x2 = pairs.select(-1, 1);
  } else {
    x1 = rotated.narrow(-1, 0, R / 2), x2 = rotated.narrow(-1, R / 2, R / 2);
  }
  auto y1 = x1 * cos - x2 * sin, y2 = x1 * sin + x2 * cos;
  auto out = interleaved_ ? torch::stack({y1, y2}, -1).flatten(-2) : torch::cat({y1, y2}, -1);
  if (R == Dh) return out;
  return torch::cat({out, x.narrow(-1, R, Dh - R)}, -1);  // the rest of the head passes through
}

std::pair<torch::Tensor, torch::Tensor> RotaryImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                           const AttentionContext& attention) {
  return {apply(q, attention.positions.query), apply(k, attention.positions.key)};
}

}  // namespace pelab
