#include "core/encodings/hard_alibi.h"

namespace pelab {

HardAlibiImpl::HardAlibiImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), first_window_(options.get_int("first_window")) {}

std::string HardAlibiImpl::description() {
  return "Hard-ALiBi (Jelassi et al. 2024): head h sees only the first_window + h nearest keys (by token index); "
         "with encoding_heads, NoPE on the other heads";
}

std::vector<OptionSpec> HardAlibiImpl::options() {
  return {OptionSpec::integer("first_window", 1, "keys head 0 sees, itself included; head h sees h more "
                              "(the reference: 1)", 1, 1 << 24)};
}

torch::Tensor HardAlibiImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                        const AttentionContext& attention) {
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (1, H, Tq, Tk); by token index (the reference's
  // positions are its indices), so a position sampler's gaps do not close the windows
  const int64_t Tq = q.size(2), Tk = k.size(2);
  const auto index = torch::TensorOptions(torch::kInt64).device(q.device());
  auto offset = torch::arange(Tq, index).view({Tq, 1}) - torch::arange(Tk, index).view({1, Tk});  // query - key
  if (!context_.causal) offset = offset.abs();  // causal: the mask hides the keys after the query
  const auto window = (torch::arange(context_.num_heads, index) + first_window_).view({-1, 1, 1});  // (H, 1, 1)
  const auto outside = offset.unsqueeze(0) >= window;                                              // (H, Tq, Tk)
  return torch::zeros(outside.sizes(), q.options()).masked_fill(outside, kOutside).unsqueeze(0);
}

}  // namespace pelab
