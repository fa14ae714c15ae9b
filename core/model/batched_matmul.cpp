#include "core/model/batched_matmul.h"

#include <ATen/Parallel.h>

namespace pelab {

namespace {

// The products without autograd: a (..., n, k) x b (..., k, m).
torch::Tensor products(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.dim() >= 3 && a.dim() == b.dim() && a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2),
              "batch_parallel_matmul: leading dimensions differ: ", a.sizes(), " x ", b.sizes());
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  TORCH_CHECK(b.size(-2) == k, "batch_parallel_matmul: inner dimensions differ: ", a.sizes(), " x ", b.sizes());
  // mixed dtypes under autocast (bf16 products, float32 softmax): compute in the wider one
  const auto dtype = at::promote_types(a.scalar_type(), b.scalar_type());
  // detached: the products run in worker threads, whose grad mode LibTorch 2.x does not turn
  // off, and its bmm_out refuses inputs that require grad (the Function below owns autograd)
  auto a3 = a.detach().to(dtype).reshape({-1, n, k}), b3 = b.detach().to(dtype).reshape({-1, k, m});
  auto shape = a.sizes().vec();
  shape.back() = m;
  // returned as allocated, not as a view: callers add biases to it in place
  auto out = torch::empty(shape, a.options().dtype(dtype));
  auto out3 = out.view({-1, n, m});
  if (!a.device().is_cpu()) {  // GPUs batch on their own
    at::bmm_out(out3, a3, b3);
  } else {
    at::parallel_for(0, a3.size(0), 1, [&](int64_t begin, int64_t end) {
      auto slice = out3.slice(0, begin, end);
      at::bmm_out(slice, a3.slice(0, begin, end), b3.slice(0, begin, end));
    });
  }
  return out;
}

struct BatchParallelMatmul : torch::autograd::Function<BatchParallelMatmul> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& a,
                               const torch::Tensor& b) {
    context->save_for_backward({a, b});
    return products(a, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto& a = saved[0];
    const auto& b = saved[1];
    const auto& g = gradients[0];  // (..., n, m)
    torch::Tensor grad_a, grad_b;
    if (context->needs_input_grad(0)) grad_a = products(g, b.transpose(-2, -1)).to(a.scalar_type());  // (..., n, k)
    if (context->needs_input_grad(1)) grad_b = products(a.transpose(-2, -1), g).to(b.scalar_type());  // (..., k, m)
    return {grad_a, grad_b};
  }
};

}  // namespace

torch::Tensor batch_parallel_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  return BatchParallelMatmul::apply(a, b);
}

}  // namespace pelab
