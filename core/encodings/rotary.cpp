#include "core/encodings/rotary.h"

#include <cmath>

namespace pelab {

RotaryImpl::RotaryImpl(const EncodingContext& context, int64_t rotary_dims, bool interleaved, double base)
    : PositionEncodingImpl(context), rotary_dims_(rotary_dims), interleaved_(interleaved), base_(base) {
  TORCH_CHECK(rotary_dims_ >= 2 && rotary_dims_ % 2 == 0 && rotary_dims_ <= context.head_dim(),
              "rotary: the rotated part of each head must be an even number of dimensions in [2, ",
              context.head_dim(), "], got ", rotary_dims_);
}

void RotaryImpl::set_extrapolation(const std::string& method, double factor) {
  TORCH_CHECK(method == "none" || method == "interpolation" || method == "ntk",
              "rotary: unknown extrapolation method '", method, "'; expected none, interpolation or ntk");
  method_ = method;
  factor_ = std::max(1.0, factor);  // only stretch beyond the training length
}

torch::Tensor RotaryImpl::angles(const torch::Tensor& positions) const {
  const int64_t R = rotary_dims_;
  double base = base_;
  if (method_ == "ntk") base *= std::pow(factor_, double(R) / double(R - 2));
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(positions.device());
  auto inverse_frequency = torch::pow(base, -torch::arange(0, R, 2, f64) / double(R));  // (R/2)
  auto p = positions.to(torch::kFloat64);
  if (method_ == "interpolation") p = p / factor_;
  return (p.unsqueeze(-1) * inverse_frequency).to(torch::kFloat32);  // (B'|1, T, R/2)
}

torch::Tensor RotaryImpl::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  const int64_t R = rotary_dims_, Dh = x.size(-1);
  auto theta = angles(collapse_broadcast_rows(positions)).unsqueeze(1).to(x.dtype());  // (B'|1, 1, T, R/2)
  auto cos = theta.cos(), sin = theta.sin();
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
