#include "core/model/fused_attention.h"

#include <ATen/Parallel.h>

#include <mutex>

#include "core/model/attention_kernels.h"

namespace pelab {

namespace {

// t: a 4-D view with unit stride along its last dimension (copied when it has none).
torch::Tensor unit_last_stride(const torch::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

// (B|1, H|1, R|1, C) -> the kernel's view; a dimension of size 1 broadcasts (stride 0).
kernels::Strided strided_view(const torch::Tensor& t) {
  if (!t.defined()) return {};
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1, "fused_attention: expected a 4-D view with unit last stride, got ",
              t.sizes(), " strides ", t.strides());
  auto stride = [&](int64_t d) { return t.size(d) == 1 ? 0 : t.stride(d); };
  return {t.data_ptr<float>(), stride(0), stride(1), stride(2)};
}

// bias or mask as a float32 4-D view with unit last stride, checked against (B, H, Tq, Tk).
torch::Tensor additive_table(const torch::Tensor& t, const char* what, int64_t B, int64_t H, int64_t Tq, int64_t Tk) {
  if (t.numel() == 0) return {};  // absent
  TORCH_CHECK(t.dim() <= 4, "fused_attention: ", what, " must have at most 4 dimensions, got ", t.sizes());
  auto table = t.dim() < 4 ? t.view([&] {
    std::vector<int64_t> shape(4 - t.dim(), 1);
    for (auto s : t.sizes()) shape.push_back(s);
    return shape;
  }())
                           : t;
  const int64_t expected[4] = {B, H, Tq, Tk};
  for (int64_t d = 0; d < 4; ++d)
    TORCH_CHECK(table.size(d) == 1 || table.size(d) == expected[d], "fused_attention: ", what, " ", t.sizes(),
                " does not broadcast to (", B, ", ", H, ", ", Tq, ", ", Tk, ")");
  TORCH_CHECK(table.size(3) == Tk, "fused_attention: ", what, " must have one column per key, got ", t.sizes());
  return unit_last_stride(table.to(torch::kFloat32));
}

struct FusedAttention : torch::autograd::Function<FusedAttention> {
  // q: (B, H, Tq, Dh), k, v: (B, H, Tk, Dh); offset_rows: (2T - 1, Dh) ascending or empty
  // -> (B, H, Tq, Dh) (memory (B, Tq, H, Dh))
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, const torch::Tensor& bias_in,
                               const torch::Tensor& mask_in, const torch::Tensor& offset_rows_in, double scale) {
    TORCH_CHECK(q_in.dim() == 4 && k_in.dim() == 4 && v_in.dim() == 4, "fused_attention: q, k, v must be (B, H, T, Dh)");
    const auto q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
    kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == dims.batch && k.size(1) == dims.heads &&
                    k.size(3) == dims.head_dim,
                "fused_attention: shapes differ: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
    const auto bias = additive_table(bias_in, "bias", dims.batch, dims.heads, dims.queries, dims.keys);
    const auto mask = additive_table(mask_in, "mask", dims.batch, dims.heads, dims.queries, dims.keys);
    torch::Tensor offset_rows;  // descending offsets, as the kernels read them
    if (offset_rows_in.numel() > 0) {
      TORCH_CHECK(dims.queries == dims.keys && offset_rows_in.dim() == 2 &&
                      offset_rows_in.size(0) == 2 * dims.keys - 1 && offset_rows_in.size(1) == dims.head_dim,
                  "fused_attention: offset rows must be (2T - 1, Dh) = (", 2 * dims.keys - 1, ", ", dims.head_dim,
                  ") for T queries and keys, got ", offset_rows_in.sizes());
      offset_rows = offset_rows_in.flip(0).contiguous();
    }

    kernels::AttentionInputs in{strided_view(q),    strided_view(k),    strided_view(v),
                                static_cast<float>(scale), strided_view(bias), strided_view(mask),
                                offset_rows.defined() ? offset_rows.data_ptr<float>() : nullptr};
    auto probs = torch::empty({dims.batch, dims.heads, dims.queries, dims.keys}, q.options());
    auto out = torch::empty({dims.batch, dims.queries, dims.heads, dims.head_dim}, q.options());
    const kernels::MutableStrided out_view{out.data_ptr<float>(), out.stride(0), out.stride(2), out.stride(1)};
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::attention_forward(dims, begin, end, in, probs.data_ptr<float>(), out_view);
    });
    context->save_for_backward({q, k, v});
    context->saved_data["probs"] = probs;
    context->saved_data["offset_rows"] = offset_rows.defined() ? offset_rows : offset_rows_in;
    context->saved_data["scale"] = scale;
    context->saved_data["bias_sizes"] = bias_in.sizes().vec();
    return out.permute({0, 2, 1, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    const auto probs = context->saved_data["probs"].toTensor();
    const auto offset_rows = context->saved_data["offset_rows"].toTensor();
    const bool relative = offset_rows.numel() > 0;
    const double scale = context->saved_data["scale"].toDouble();
    const auto grad_out = unit_last_stride(gradients[0]);
    kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    kernels::AttentionInputs in{strided_view(q), strided_view(k), strided_view(v), static_cast<float>(scale),
                                {}, {}, relative ? offset_rows.data_ptr<float>() : nullptr};
    auto grad_q = torch::empty(q.sizes(), q.options());
    auto grad_k = torch::empty(k.sizes(), k.options());
    auto grad_v = torch::empty(v.sizes(), v.options());
    const bool bias_needs_grad = context->needs_input_grad(3);  // an absent bias never does
    torch::Tensor grad_scores, grad_offset_rows;
    if (bias_needs_grad) grad_scores = torch::empty(probs.sizes(), probs.options());
    if (relative) grad_offset_rows = torch::zeros(offset_rows.sizes(), offset_rows.options());
    std::mutex sum_offset_rows;
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      torch::Tensor mine;  // this thread's share of the offset rows' gradient
      if (relative) mine = torch::zeros(offset_rows.sizes(), offset_rows.options());
      const kernels::AttentionGradients grad{grad_q.data_ptr<float>(), grad_k.data_ptr<float>(),
                                             grad_v.data_ptr<float>(),
                                             bias_needs_grad ? grad_scores.data_ptr<float>() : nullptr,
                                             relative ? mine.data_ptr<float>() : nullptr};
      kernels::attention_backward(dims, begin, end, in, probs.data_ptr<float>(), strided_view(grad_out), grad);
      if (relative) {
        std::lock_guard<std::mutex> lock(sum_offset_rows);
        grad_offset_rows.add_(mine);
      }
    });
    torch::Tensor grad_bias;
    if (bias_needs_grad) grad_bias = grad_scores.sum_to_size(context->saved_data["bias_sizes"].toIntVector());
    if (relative) grad_offset_rows = grad_offset_rows.flip(0);  // back to ascending offsets
    return {grad_q, grad_k, grad_v, grad_bias, torch::Tensor(), grad_offset_rows, torch::Tensor()};
  }
};

}  // namespace

bool fused_attention_supports(const torch::Tensor& q) {
  return q.device().is_cpu() && q.scalar_type() == torch::kFloat32;
}

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                              const torch::Tensor& bias, const torch::Tensor& mask, const torch::Tensor& offset_rows) {
  TORCH_CHECK(fused_attention_supports(q) && fused_attention_supports(k) && fused_attention_supports(v),
              "fused_attention: q, k and v must be float32 CPU tensors");
  // LibTorch 1.13's custom functions take no undefined tensors: an empty one stands for none
  const auto absent = torch::empty({0}, q.options());
  auto or_absent = [&](const torch::Tensor& t) { return t.defined() ? t : absent; };
  return FusedAttention::apply(q, k, v, or_absent(bias), or_absent(mask), or_absent(offset_rows), scale);
}

}  // namespace pelab
