#include "core/model/gelu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/model/gelu_kernels.h"

namespace pelab {

namespace {

constexpr int64_t kGrain = 16384;  // elements per parallel chunk (64 KB of input)

// The rows of a (rows, cols) array go in chunks of chunk_rows (about kGrain elements); the
// backward sums each chunk's bias gradient into its own row of partial sums and adds those
// rows in chunk order: the sum does not depend on the number of threads.
int64_t chunk_rows(int64_t cols) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)); }

struct Gelu : torch::autograd::Function<Gelu> {
  // x: (..., C) float32 CPU; bias: (C), or (0) for none -> gelu(x + bias), contiguous
  // (LibTorch 1.13's custom functions take no undefined tensors)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x_in,
                               const torch::Tensor& bias_in) {
    RECORD_FUNCTION("pelab::gelu_forward", std::vector<c10::IValue>());  // for pelab bench --trace
    const auto x = x_in.contiguous();
    const auto bias = bias_in.contiguous();
    auto y = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    const float* in = x.data_ptr<float>();
    const float* b = bias.numel() ? bias.data_ptr<float>() : nullptr;
    float* out = y.data_ptr<float>();
    if (b) {
      const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1), step = chunk_rows(cols);
      at::parallel_for(0, rows, step, [&](int64_t begin, int64_t end) {
        kernels::gelu_forward(in + begin * cols, b, out + begin * cols, end - begin, cols);
      });
    } else {
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        kernels::gelu_forward(in + begin, nullptr, out + begin, 1, end - begin);
      });
    }
    context->save_for_backward({x, bias});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &x = saved[0], &bias = saved[1];
    const auto grad_y = gradients[0].contiguous();
    auto grad_x = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    const float *in = x.data_ptr<float>(), *g = grad_y.data_ptr<float>();
    float* out = grad_x.data_ptr<float>();
    if (!bias.numel()) {
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        kernels::gelu_backward(in + begin, nullptr, g + begin, out + begin, nullptr, 1, end - begin);
      });
      return {grad_x, torch::Tensor()};
    }
    const float* b = bias.data_ptr<float>();
    const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1), step = chunk_rows(cols),
                  chunks = (rows + step - 1) / step;
    const bool bias_grad = context->needs_input_grad(1);
    auto partial_sums = bias_grad ? torch::zeros({chunks, cols}, x.options()) : torch::Tensor();  // (chunks, C)
    float* sums = bias_grad ? partial_sums.data_ptr<float>() : nullptr;
    at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t chunk = first; chunk < last; ++chunk) {
        const int64_t begin = chunk * step, n = std::min(step, rows - begin);
        kernels::gelu_backward(in + begin * cols, b, g + begin * cols, out + begin * cols,
                               sums ? sums + chunk * cols : nullptr, n, cols);
      }
    });
    if (!bias_grad) return {grad_x, torch::Tensor()};
    auto grad_bias = torch::zeros({cols}, x.options());  // (C)
    float* total = grad_bias.data_ptr<float>();
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      for (int64_t c = 0; c < cols; ++c) total[c] += sums[chunk * cols + c];
    return {grad_x, grad_bias};
  }
};

}  // namespace

torch::Tensor gelu_activation(const torch::Tensor& x, const torch::Tensor& bias) {
  if (bias.defined() && (bias.dim() != 1 || x.dim() == 0 || bias.size(0) != x.size(-1)))
    throw std::invalid_argument("gelu_activation: the bias must have shape (" +
                                std::to_string(x.dim() ? x.size(-1) : 0) + "), one value per last-dimension entry of x");
  const bool kernel = x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
                      (!bias.defined() || (bias.device().is_cpu() && bias.scalar_type() == torch::kFloat32));
  if (!kernel) return torch::gelu(bias.defined() ? x + bias : x);
  return Gelu::apply(x, bias.defined() ? bias : torch::empty({0}, x.options()));
}

}  // namespace pelab
