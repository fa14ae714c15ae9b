#include "core/encodings/hard_alibi.h"

#include "core/encodings/relative.h"

namespace pelab {

HardAlibiImpl::HardAlibiImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), first_window_(options.get_int("first_window")) {}

std::string HardAlibiImpl::description() {
  return "Hard-ALiBi (Jelassi et al. 2024): head h sees only the keys within first_window + h positions; with "
         "encoding_heads, NoPE on the other heads";
}

std::vector<OptionSpec> HardAlibiImpl::options() {
  return {OptionSpec::integer("first_window", 1, "keys head 0 sees, itself included; head h sees h more "
                              "(the reference: 1)", 1, 1 << 24)};
}

torch::Tensor HardAlibiImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                        const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  const auto options = torch::TensorOptions().dtype(q.scalar_type()).device(q.device());
  auto distance = geometry.offsets().to(q.device());  // (W): query - key
  if (!context_.causal) distance = distance.abs();    // causal: the mask hides the keys after the query
  const auto window = torch::arange(context_.num_heads, distance.options()).unsqueeze(1) + first_window_;  // (H, 1)
  const auto outside = distance.unsqueeze(0) >= window;                                                     // (H, W)
  return geometry.bias(torch::zeros(outside.sizes(), options).masked_fill(outside, kOutside));
}

}  // namespace pelab
