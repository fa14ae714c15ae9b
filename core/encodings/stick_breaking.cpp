#include "core/encodings/stick_breaking.h"

#include <ATen/Parallel.h>

#include "core/encodings/kernel_views.h"
#include "core/kernels/stick_breaking.h"

namespace pelab {

namespace {

kernels::StickBreakingInputs inputs_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, const torch::Tensor& mask, bool attend_current) {
  return {kernel_view(q), kernel_view(k), kernel_view(v), static_cast<float>(scale), kernel_view(mask), attend_current};
}

struct StickBreakingAttention : torch::autograd::Function<StickBreakingAttention> {
  // mask: (B|1, 1, T|1, T) float32 or empty (none)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, const torch::Tensor& mask_in,
                               double scale, bool attend_current) {
    const auto q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
    const auto mask = mask_in.numel() > 0 ? unit_last_stride(mask_in.to(torch::kFloat32)) : mask_in;
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    auto out = torch::empty(q.sizes(), q.options());
    const auto in = inputs_of(q, k, v, scale, mask, attend_current);
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::stick_breaking_forward(dims, begin, end, in, mutable_kernel_view(out));
    });
    context->save_for_backward({q, k, v, mask});
    context->saved_data["scale"] = scale;
    context->saved_data["attend_current"] = attend_current;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &mask = saved[3];
    const auto grad_out = unit_last_stride(gradients[0]);
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    auto grad_q = torch::empty(q.sizes(), q.options()), grad_k = torch::empty(k.sizes(), k.options()),
         grad_v = torch::empty(v.sizes(), v.options());
    const auto in = inputs_of(q, k, v, context->saved_data["scale"].toDouble(), mask,
                              context->saved_data["attend_current"].toBool());
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::stick_breaking_backward(dims, begin, end, in, kernel_view(grad_out), mutable_kernel_view(grad_q),
                                       mutable_kernel_view(grad_k), mutable_kernel_view(grad_v));
    });
    return {grad_q, grad_k, grad_v, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Stick-breaking attention by the fused kernels (core/kernels/stick_breaking.h): q, k, v (B, H,
// T, Dh) float32 CPU; key_mask: additive (B|1, 1, T|1, T), -inf at masked keys, or undefined -> (B, H, T, Dh)
torch::Tensor stick_breaking_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, const torch::Tensor& key_mask, bool attend_current) {
  TORCH_CHECK(q.device().is_cpu() && q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
                  v.scalar_type() == torch::kFloat32,
              "stick_breaking_attention: q, k and v must be float32 CPU tensors");
  TORCH_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && k.sizes() == v.sizes(),
              "stick_breaking_attention: q, k, v must be (B, H, T, Dh) alike, got ", q.sizes(), ", ", k.sizes(), ", ",
              v.sizes());
  TORCH_CHECK(!key_mask.defined() || (key_mask.dim() == 4 && key_mask.size(1) == 1 && key_mask.size(3) == k.size(2)),
              "stick_breaking_attention: key_mask must be (B|1, 1, T|1, T), got ", key_mask.sizes());
  const auto absent = torch::empty({0}, q.options());
  return StickBreakingAttention::apply(q, k, v, key_mask.defined() ? key_mask : absent, scale, attend_current);
}

}  // namespace

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
