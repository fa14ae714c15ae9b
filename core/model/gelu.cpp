#include "core/model/gelu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "core/model/gelu_kernels.h"

namespace pelab {

namespace {

constexpr int64_t kGrain = 16384;  // elements per parallel chunk (64 KB of input)

struct Gelu : torch::autograd::Function<Gelu> {
  // x: any shape, float32 CPU -> gelu(x), contiguous
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x_in) {
    RECORD_FUNCTION("pelab::gelu_forward", std::vector<c10::IValue>());  // for pelab bench --trace
    const auto x = x_in.contiguous();
    auto y = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      kernels::gelu_forward(in + begin, out + begin, end - begin);
    });
    context->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto x = context->get_saved_variables()[0];
    const auto grad_y = gradients[0].contiguous();
    auto grad_x = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    const float *in = x.data_ptr<float>(), *g = grad_y.data_ptr<float>();
    float* out = grad_x.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      kernels::gelu_backward(in + begin, g + begin, out + begin, end - begin);
    });
    return {grad_x};
  }
};

}  // namespace

torch::Tensor gelu_activation(const torch::Tensor& x) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat32) return torch::gelu(x);
  return Gelu::apply(x);
}

}  // namespace pelab
