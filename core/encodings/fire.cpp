#include "core/encodings/fire.h"

#include "core/encodings/relative.h"

namespace pelab {

FireImpl::FireImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), max_length_(options.get_float("max_length")), eps_(1e-6) {
  const int64_t width = options.get_int("mlp_width");
  hidden_ = register_module("hidden", torch::nn::ModuleList());
  output_ = register_module("output", torch::nn::ModuleList());
  for (int64_t l = 0; l < context.num_layers; ++l) {
    if (!context.serves(l)) {  // placeholders without parameters
      hidden_->push_back(linear_if(false, 1, width));
      output_->push_back(linear_if(false, width, context.num_heads));
      c_.emplace_back();
      length_multiplier_.emplace_back();
      continue;
    }
    hidden_->push_back(torch::nn::Linear(1, width));
    output_->push_back(torch::nn::Linear(width, context.num_heads));
    c_.push_back(register_parameter("c_" + std::to_string(l), torch::full({}, options.get_float("init_c"))));
    length_multiplier_.push_back(register_parameter("length_multiplier_" + std::to_string(l), torch::ones({})));
  }
}

std::string FireImpl::description() {
  return "FIRE (Li et al. 2023): MLP of log|i-j| / log(max(L, i)), learned c and L per layer";
}

std::vector<OptionSpec> FireImpl::options() {
  return {
      OptionSpec::integer("mlp_width", 32, "hidden width of the MLP f", 1, 4096),
      OptionSpec::real("init_c", 0.1, "initial c of psi(x) = log(|c x| + 1)", 1e-6, 1e6),
      OptionSpec::real("max_length", 512.0, "initial threshold L (learned through a multiplier)", 1.0, 1e9),
  };
}

torch::Tensor FireImpl::interpolated_distance(const Positions& positions, int64_t layer) const {
  const auto& c = c_[layer];
  auto offsets = relative_offsets(positions).to(c.dtype());  // (B'|1, Tq, Tk)
  auto query = positions.query.narrow(0, 0, offsets.size(0)).to(c.dtype()).unsqueeze(-1);  // (B'|1, Tq, 1)
  return psi_ratio(offsets, torch::max(query, threshold(layer)), layer);
}

torch::Tensor FireImpl::threshold(int64_t layer) const { return (length_multiplier_[layer] * max_length_).abs(); }

torch::Tensor FireImpl::psi_ratio(const torch::Tensor& distance, const torch::Tensor& normaliser, int64_t layer) const {
  const auto& c = c_[layer];
  return torch::log((c * distance).abs() + 1) / (torch::log((c * normaliser).abs() + 1) + eps_);
}

torch::Tensor FireImpl::mlp_reference(const torch::Tensor& x, int64_t layer) {
  auto hidden = hidden_[layer]->as<torch::nn::Linear>();
  auto output = output_[layer]->as<torch::nn::Linear>();
  return output->forward(torch::relu(hidden->forward(x.unsqueeze(-1))));
}

torch::Tensor FireImpl::mlp(const torch::Tensor& x, int64_t layer) {
  auto hidden = hidden_[layer]->as<torch::nn::Linear>();
  auto output = output_[layer]->as<torch::nn::Linear>();
  auto w1 = hidden->weight.squeeze(1), b1 = hidden->bias;  // (W)
  auto w2 = output->weight, b2 = output->bias;             // (H, W), (H)
  torch::Tensor kinks, active;
  {
    torch::NoGradGuard no_grad;  // where the segments are does not carry gradient
    const double far = 1e20;
    kinks = torch::where(w1 != 0, -b1 / w1, torch::full_like(w1, far)).clamp(-far, far);
    kinks = std::get<0>(kinks.sort());  // (W), ascending
    // one point inside each of the W + 1 segments, and which units are on there
    auto inner = (kinks.narrow(0, 0, kinks.size(0) - 1) + kinks.narrow(0, 1, kinks.size(0) - 1)) / 2;
    auto points = torch::cat({kinks.narrow(0, 0, 1) - 1, inner, kinks.narrow(0, kinks.size(0) - 1, 1) + 1});
    active = (points.unsqueeze(1) * w1.unsqueeze(0) + b1.unsqueeze(0) > 0).to(w1.dtype());  // (W + 1, W)
  }
  auto slope = torch::matmul(active, (w2 * w1.unsqueeze(0)).t());           // (W + 1, H)
  auto intercept = torch::matmul(active, (w2 * b1.unsqueeze(0)).t()) + b2;  // (W + 1, H)
  auto segment = torch::bucketize(x.detach(), kinks).reshape(-1);           // (N) in [0, W]
  auto out = slope.index_select(0, segment) * x.reshape({-1, 1}) + intercept.index_select(0, segment);  // (N, H)
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.push_back(out.size(1));
  return out.view(shape);
}

torch::Tensor FireImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const int64_t layer = attention.layer;
  const RelativeGeometry geometry(attention.positions);
  if (geometry.contiguous()) {
    // While every query position is below L the denominator is psi(L) for all of them, and
    // the bias depends on the offset alone: evaluate f once per offset.
    const auto L = threshold(layer);
    const int64_t last_query = attention.positions.query[0][-1].item<int64_t>();
    if (double(last_query) <= L.item<double>()) {
      auto x = psi_ratio(geometry.offsets().to(L.dtype()), L, layer);  // (W)
      return geometry.bias(mlp(x, layer).t().to(q.scalar_type()));     // (H, W) -> (1, H, Tq, Tk)
    }
  }
  auto x = interpolated_distance(attention.positions, attention.layer);  // (B'|1, Tq, Tk)
  // GPUs: the plain MLP (fire.h)
  auto f = x.device().is_cpu() ? mlp(x, layer) : mlp_reference(x, layer);  // (B'|1, Tq, Tk, H)
  return f.permute({0, 3, 1, 2}).to(q.scalar_type());                       // (B'|1, H, Tq, Tk)
}

}  // namespace pelab
