#include "core/encodings/rope.h"

#include <cmath>

namespace pelab {

namespace {
// The rotated dimensions: fraction x head size, down to whole pairs; at least one pair.
int64_t rotated_dims(const EncodingContext& context, double fraction) {
  const int64_t dims = static_cast<int64_t>(std::floor(context.head_dim() * fraction / 2.0)) * 2;
  TORCH_CHECK(dims >= 2, "rope: rotary_fraction ", fraction, " rotates no pair of the head's ", context.head_dim(),
              " dimensions; it must be at least ", 2.0 / context.head_dim());
  return dims;
}
}  // namespace

RopeImpl::RopeImpl(const EncodingContext& context, const OptionValues& options)
    : RotaryImpl(context, rotated_dims(context, options.get_float("rotary_fraction")),
                 options.get_string("layout") == "interleaved", options.get_float("base"),
                 RotaryExtrapolationOptions::from(options)),
      rerope_window_(options.get_float("rerope_window")),
      rerope_leak_(options.get_float("rerope_leak")) {
  supports_rerope_ = true;
  const bool full_spectrum = options.get_string("spectrum") == "head";
  set_spectrum(full_spectrum ? context.head_dim() : rotary_dims_, options.get_float("min_turn_length"));
}

std::string RopeImpl::description() {
  return "RoPE (Su et al. 2021): rotate q and k by position; interleaved or half-split pairs";
}

std::vector<OptionSpec> RopeImpl::options() {
  std::vector<OptionSpec> specs = {
      OptionSpec::choice("layout", "interleaved", {"interleaved", "half"},
                         "pairs (x0, x1), ... (RoFormer, x-transformers, DeepMind) or (x_i, x_{i+R/2}) (NeoX, LLaMA)"),
      OptionSpec::real("base", 10000.0, "wavelength base", 1.0, 1e12),
      OptionSpec::real("rotary_fraction", 1.0, "share of each head that is rotated, in whole pairs, at least one (the rest passes through)",
                       0.0, 1.0),
      OptionSpec::choice("spectrum", "rotated", {"rotated", "head"},
                         "frequencies base^(-2i/R) over the rotated part (rotated) or base^(-2i/Dh) of the full head, "
                         "so that rotary_fraction p keeps its highest fraction p (head: p-RoPE, Barbero et al. 2025)"),
      OptionSpec::real("min_turn_length", 0.0, "pairs turning less than once over this many positions do not rotate "
                       "(HoPE, Chen et al. 2024: the training length; 0: all rotate)", 0.0, 1e12),
  };
  for (auto& spec : RotaryExtrapolationOptions::specs()) specs.push_back(spec);
  specs.push_back(OptionSpec::real("rerope_window", 0.0, "eval.extrapolation rerope, leaky_rerope: offsets beyond this "
                                   "window are clamped or slowed (0: L - 1, the longest trained offset)", 0.0, 1e12));
  specs.push_back(OptionSpec::real("rerope_leak", 0.0, "eval.extrapolation leaky_rerope: offsets beyond the window "
                                   "advance 1 / this per position (0: (T - 1 - w) / (L - 1 - w), the longest test "
                                   "offset at the longest trained one)", 0.0, 1e12));
  return specs;
}

std::pair<double, double> RopeImpl::rerope_window_and_leak(int64_t test_tokens) const {
  // offsets up to L - 1 were trained (L: the longest training sequence in tokens)
  const double longest_trained = static_cast<double>(extrapolation_.training_length) - 1;
  const double w = rerope_window_ > 0 ? rerope_window_ : longest_trained;
  TORCH_CHECK(w > 0, "rope: ", extrapolation_.method, " needs rerope_window or the training length");
  // the default leak brings the longest test offset T - 1 to L - 1; with w >= L - 1 it can only
  // bring it to w + 1
  const double longest = static_cast<double>(test_tokens) - 1;
  const double leak = rerope_leak_ > 0 ? rerope_leak_
                      : w < longest_trained ? std::max(1.0, (longest - w) / (longest_trained - w))
                                            : std::max(1.0, longest - w);
  return {w, extrapolation_.method == "rerope" ? 0.0 : leak};
}

std::pair<torch::Tensor, torch::Tensor> RopeImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                         const AttentionContext& attention) {
  if (rerope()) return {std::move(q), std::move(k)};  // score_bias makes the whole rotary score
  return RotaryImpl::rotate(std::move(q), std::move(k), attention);
}

torch::Tensor RopeImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  if (!rerope()) return {};
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh), as projected -> (B'|B, H, Tq, Tk)
  const auto& p = attention.positions;
  const auto pq = p.query.to(torch::kFloat64), pk = p.key.to(torch::kFloat64);  // (B'|1, T)
  const auto [w, leak] = rerope_window_and_leak(q.size(2));
  auto scores = [&](const torch::Tensor& query_positions, const torch::Tensor& key_positions) {
    return torch::matmul(apply(q, query_positions), apply(k, key_positions).transpose(-2, -1));
  };
  const auto offsets = (pq.unsqueeze(-1) - pk.unsqueeze(-2)).unsqueeze(1);  // (B'|1, 1, Tq, Tk)
  // beyond the window: the key at 0 and the query at the clamped offset (rerope), or both slowed
  // by the leak so that their difference is w + (d - w) / k (leaky_rerope); on both sides of d = 0
  auto beyond = [&](double sign) {
    if (leak == 0) return scores(torch::full_like(pq, sign * w), torch::zeros_like(pk));
    return scores(pq / leak + sign * w * (1 - 1 / leak), pk / leak);
  };
  auto rotary = scores(pq, pk);
  rotary = torch::where(offsets >= w, beyond(1.0), rotary);
  if (!context().causal) rotary = torch::where(offsets <= -w, beyond(-1.0), rotary);
  const auto plain = torch::matmul(q, k.transpose(-2, -1));
  return (rotary - plain) * attention_scale();
}

}  // namespace pelab
