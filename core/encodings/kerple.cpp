#include "core/encodings/kerple.h"

#include "core/encodings/relative.h"

namespace pelab {

KerpleImpl::KerpleImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), log_(options.get_string("variant") == "log") {
  const int64_t H = context.num_heads;
  r1_ = register_parameter("r1", torch::rand({H}) * (log_ ? 2.0 : 1.0));
  r2_ = register_parameter("r2", torch::rand({H}) * (log_ ? 1.0 : 2.0));
}

std::string KerpleImpl::description() {
  return "KERPLE (Chi et al. 2022): -r1 log(1 + r2 |i-j|) or -r1 |i-j|^r2, learned per head";
}

std::vector<OptionSpec> KerpleImpl::options() {
  return {OptionSpec::choice("variant", "log", {"log", "power"}, "logarithmic or power kernel")};
}

torch::Tensor KerpleImpl::kernel(const torch::Tensor& distance) {
  {
    // The reference clamps .data in place: the values change, autograd's record does not
    // (every layer calls this; a tracked in-place clamp would invalidate earlier layers).
    torch::NoGradGuard no_grad;
    r1_.data().clamp_(kEps);
    if (log_) r2_.data().clamp_(kEps);
    else r2_.data().clamp_(kEps, 2.0);
  }
  auto d = distance.to(r1_.dtype()).unsqueeze(0);  // (1, R)
  auto r1 = r1_.unsqueeze(1), r2 = r2_.unsqueeze(1);
  return log_ ? -r1 * torch::log1p(r2 * d) : -r1 * torch::pow(d, r2);
}

torch::Tensor KerpleImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  return geometry.bias(kernel(geometry.offsets().abs()).to(q.scalar_type()));  // (H, W) -> (B'|1, H, Tq, Tk)
}

}  // namespace pelab
