#include "core/encodings/alibi.h"

#include <cmath>

#include "core/encodings/host_to_device.h"
#include "core/encodings/relative.h"

namespace pelab {

namespace {
std::vector<double> power_of_two_slopes(int64_t n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3)));
  std::vector<double> slopes;
  for (int64_t i = 0; i < n; ++i) slopes.push_back(std::pow(start, double(i + 1)));
  return slopes;
}
}  // namespace

torch::Tensor alibi_slopes(int64_t heads) {
  int64_t closest = 1;
  while (closest * 2 <= heads) closest *= 2;
  std::vector<double> slopes = power_of_two_slopes(closest);
  if (closest < heads) {
    const std::vector<double> doubled = power_of_two_slopes(2 * closest);
    for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(doubled[i]);
  }
  return torch::tensor(slopes, torch::kFloat64).to(torch::kFloat32);
}

AlibiImpl::AlibiImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context),
      deepmind_(options.get_string("variant") == "deepmind"),
      biased_heads_(options.get_int("heads") > 0 ? options.get_int("heads") : context.num_heads) {
  TORCH_CHECK(biased_heads_ <= context.num_heads, "alibi: heads = ", biased_heads_, " exceeds the model's ",
              context.num_heads, " heads");
  if (options.get_bool("learned_slopes"))
    log_slopes_ = register_parameter("log_slopes", alibi_slopes(biased_heads_).log());
}

const torch::Tensor& AlibiImpl::fixed_slopes(torch::Device device) {
  if (!fixed_slopes_.defined() || fixed_slopes_.device() != device)
    fixed_slopes_ = host_to_device(alibi_slopes(biased_heads_), device);
  return fixed_slopes_;
}

std::string AlibiImpl::description() {
  return "ALiBi (Press et al. 2022): -m_h |query - key| per head; DeepMind variant, a subset of heads, learned slopes";
}

std::vector<OptionSpec> AlibiImpl::options() {
  return {OptionSpec::choice("variant", "standard", {"standard", "deepmind"},
                             "-m|i-j| (causal or symmetric), or DeepMind's m(-|i-j| + 0.5 [j < i])"),
          OptionSpec::integer("heads", 0, "heads with a bias, the first ones, with the slopes of that many heads "
                              "(x-transformers alibi_num_heads); 0: every head", 0, 1 << 16),
          OptionSpec::boolean("learned_slopes", false, "learn the slopes (as logarithms, from Press's values)")};
}

torch::Tensor AlibiImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto options = torch::TensorOptions().dtype(q.scalar_type()).device(q.device());
  auto distance = geometry.offsets().to(q.scalar_type());  // (W): query - key
  auto base = -distance.abs();
  if (deepmind_) base = base + 0.5 * (distance > 0).to(q.scalar_type());      // key left of the query
  auto slopes = log_slopes_.defined() ? log_slopes_.exp().to(options) : fixed_slopes(q.device()).to(options);
  if (biased_heads_ < context_.num_heads)  // the other heads: slope 0
    slopes = torch::cat({slopes, torch::zeros({context_.num_heads - biased_heads_}, options)});
  auto per_offset = slopes.unsqueeze(1) * base.unsqueeze(0);  // (H, W)
  return geometry.bias(per_offset);
}

}  // namespace pelab
