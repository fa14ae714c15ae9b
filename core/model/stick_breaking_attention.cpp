#include "core/model/stick_breaking_attention.h"

#include <ATen/Parallel.h>

#include "core/kernels/stick_breaking.h"

namespace pelab {

namespace {

torch::Tensor unit_last_stride(const torch::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

kernels::Strided view_of(const torch::Tensor& t) {
  if (t.numel() == 0) return {};
  auto stride = [&](int64_t d) { return t.size(d) == 1 ? 0 : t.stride(d); };
  return {t.data_ptr<float>(), stride(0), stride(1), stride(2)};
}

kernels::MutableStrided mutable_view_of(const torch::Tensor& t) {
  return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.stride(2)};
}

kernels::StickBreakingInputs inputs_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, const torch::Tensor& mask, bool attend_current) {
  return {view_of(q), view_of(k), view_of(v), static_cast<float>(scale), view_of(mask), attend_current};
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
      kernels::stick_breaking_forward(dims, begin, end, in, mutable_view_of(out));
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
      kernels::stick_breaking_backward(dims, begin, end, in, view_of(grad_out), mutable_view_of(grad_q),
                                       mutable_view_of(grad_k), mutable_view_of(grad_v));
    });
    return {grad_q, grad_k, grad_v, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

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

}  // namespace pelab
