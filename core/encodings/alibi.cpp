#include "core/encodings/alibi.h"

#include <cmath>

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
    : PositionEncodingImpl(context), deepmind_(options.get_string("variant") == "deepmind") {}

std::string AlibiImpl::description() {
  return "ALiBi (Press et al. 2022): -m_h |query - key| per head, no parameters; DeepMind variant";
}

std::vector<OptionSpec> AlibiImpl::options() {
  return {OptionSpec::choice("variant", "standard", {"standard", "deepmind"},
                             "-m|i-j| (causal or symmetric), or DeepMind's m(-|i-j| + 0.5 [j < i])")};
}

torch::Tensor AlibiImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto options = torch::TensorOptions().dtype(q.scalar_type()).device(q.device());
  auto distance = geometry.offsets().to(q.scalar_type());  // (W): query - key
  auto base = -distance.abs();
  if (deepmind_) base = base + 0.5 * (distance > 0).to(q.scalar_type());      // key left of the query
  auto per_offset = alibi_slopes(context_.num_heads).to(options).unsqueeze(1) * base.unsqueeze(0);  // (H, W)
  return geometry.bias(per_offset);
}

}  // namespace pelab
