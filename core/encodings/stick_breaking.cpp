#include "core/encodings/stick_breaking.h"

#include "core/model/stick_breaking_attention.h"

namespace pelab {

StickBreakingImpl::StickBreakingImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), attend_current_(options.get_bool("attend_current")) {
  TORCH_CHECK(context.causal, "stick_breaking is defined for causal attention only (the breaking runs from the "
              "query backwards); set model.causal: true");
}

std::string StickBreakingImpl::description() {
  return "stick-breaking attention (Tan et al. 2024): each key takes sigmoid(q.k) of what the nearer keys "
         "left, instead of a softmax; causal only";
}

std::vector<OptionSpec> StickBreakingImpl::options() {
  return {OptionSpec::boolean("attend_current", false, "the query's own key breaks first (else keys before it only)")};
}

torch::Tensor StickBreakingImpl::attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                                   const AttentionContext& attention) {
  const int64_t Tq = scores.size(-2), Tk = scores.size(-1);
  const auto z = scores.to(torch::kFloat32);
  // the keys a query draws from: before it (or up to it), and not masked
  auto drawn = torch::ones({Tq, Tk}, torch::TensorOptions(torch::kBool).device(z.device())).tril(attend_current_ ? 0 : -1);
  if (masked.defined()) drawn = drawn.logical_and(masked.logical_not());
  const auto zero = torch::zeros({}, z.options());
  const auto taken = torch::where(drawn, torch::log_sigmoid(z), zero);   // log beta_ij
  const auto left = torch::where(drawn, torch::log_sigmoid(-z), zero);   // log (1 - beta_ij)
  // sum over the drawn keys after j (nearer the query): a suffix sum without j itself
  const auto nearer = left.flip(-1).cumsum(-1).flip(-1) - left;
  return torch::where(drawn, (taken + nearer).exp(), zero).to(scores.scalar_type());
}

torch::Tensor StickBreakingImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& key_mask, const AttentionContext& attention) {
  if (!q.device().is_cpu() || q.scalar_type() != torch::kFloat32) return {};
  return stick_breaking_attention(q, k, v, attention_scale(), key_mask, attend_current_);
}

}  // namespace pelab
