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
                 RotaryExtrapolationOptions::from(options)) {}

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
  };
  for (auto& spec : RotaryExtrapolationOptions::specs()) specs.push_back(spec);
  return specs;
}

}  // namespace pelab
