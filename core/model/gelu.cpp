#include "core/model/gelu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/kernels/gelu.h"
#include "core/model/row_chunks.h"

namespace pelab {

namespace {

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
      const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
      for_each_row_chunk(rows, cols, [&](int64_t, int64_t first, int64_t n) {
        kernels::gelu_forward(in + first * cols, b, out + first * cols, n, cols);
      });
    } else {
      at::parallel_for(0, x.numel(), kChunkElements, [&](int64_t begin, int64_t end) {
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
      at::parallel_for(0, x.numel(), kChunkElements, [&](int64_t begin, int64_t end) {
        kernels::gelu_backward(in + begin, nullptr, g + begin, out + begin, nullptr, 1, end - begin);
      });
      return {grad_x, torch::Tensor()};
    }
    const float* b = bias.data_ptr<float>();
    const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
    // the bias's gradient: per-chunk column sums, added in chunk order (row_chunks.h)
    const bool bias_grad = context->needs_input_grad(1);
    auto partial_sums = bias_grad ? torch::zeros({row_chunk_count(rows, cols), cols}, x.options()) : torch::Tensor();
    float* sums = bias_grad ? partial_sums.data_ptr<float>() : nullptr;
    for_each_row_chunk(rows, cols, [&](int64_t chunk, int64_t first, int64_t n) {
      kernels::gelu_backward(in + first * cols, b, g + first * cols, out + first * cols, sums ? sums + chunk * cols : nullptr,
                             n, cols);
    });
    return {grad_x, bias_grad ? sum_of_chunk_rows(partial_sums) : torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gelu_activation(const torch::Tensor& x, const torch::Tensor& bias) {
  if (bias.defined() && (bias.dim() != 1 || x.dim() == 0 || bias.size(0) != x.size(-1)))
    throw std::invalid_argument("gelu_activation: the bias must have shape (" +
                                std::to_string(x.dim() ? x.size(-1) : 0) + "), one value per last-dimension entry of x");
  const bool kernel = x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
                      (!bias.defined() || (bias.device().is_cpu() && bias.scalar_type() == torch::kFloat32));
  if (!kernel) return torch::gelu(bias.defined() ? x + bias.to(x.scalar_type()) : x);  // bf16 stays bf16
  return Gelu::apply(x, bias.defined() ? bias : torch::empty({0}, x.options()));
}

}  // namespace pelab
