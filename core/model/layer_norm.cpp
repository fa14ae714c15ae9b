#include "core/model/layer_norm.h"

#include <ATen/record_function.h>

#include "core/kernels/layer_norm.h"
#include "core/model/row_chunks.h"

namespace pelab {

namespace {

struct LayerNorm : torch::autograd::Function<LayerNorm> {
  // x: (..., C), weight, bias: (C), float32 CPU -> (..., C), contiguous
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, const torch::Tensor& bias_in, double eps) {
    RECORD_FUNCTION("pelab::layer_norm_forward", std::vector<c10::IValue>());  // for pelab bench --trace
    const auto x = x_in.contiguous(), weight = weight_in.contiguous(), bias = bias_in.contiguous();
    const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
    auto y = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    auto mean = torch::empty({rows}, x.options()), rstd = torch::empty({rows}, x.options());  // (rows)
    const float *in = x.data_ptr<float>(), *w = weight.data_ptr<float>(), *b = bias.data_ptr<float>();
    float *out = y.data_ptr<float>(), *means = mean.data_ptr<float>(), *rstds = rstd.data_ptr<float>();
    for_each_row_chunk(rows, cols, [&](int64_t, int64_t first, int64_t n) {
      kernels::layer_norm_forward(in + first * cols, w, b, static_cast<float>(eps), out + first * cols, means + first,
                                  rstds + first, n, cols);
    });
    context->save_for_backward({x, weight, mean, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto grad_y = gradients[0].contiguous();
    const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1),
                  chunks = row_chunk_count(rows, cols);
    auto grad_x = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    // the weight's and bias's gradients: per-chunk column sums (chunks, C), added in order
    const bool weight_grad = context->needs_input_grad(1), bias_grad = context->needs_input_grad(2);
    auto weight_partial = weight_grad ? torch::zeros({chunks, cols}, x.options()) : torch::Tensor();
    auto bias_partial = bias_grad ? torch::zeros({chunks, cols}, x.options()) : torch::Tensor();
    const float *in = x.data_ptr<float>(), *w = weight.data_ptr<float>(), *means = mean.data_ptr<float>(),
                *rstds = rstd.data_ptr<float>(), *g = grad_y.data_ptr<float>();
    float* out = grad_x.data_ptr<float>();
    float* weight_sums = weight_grad ? weight_partial.data_ptr<float>() : nullptr;
    float* bias_sums = bias_grad ? bias_partial.data_ptr<float>() : nullptr;
    for_each_row_chunk(rows, cols, [&](int64_t chunk, int64_t first, int64_t n) {
      kernels::layer_norm_backward(in + first * cols, w, means + first, rstds + first, g + first * cols,
                                   out + first * cols, weight_sums ? weight_sums + chunk * cols : nullptr,
                                   bias_sums ? bias_sums + chunk * cols : nullptr, n, cols);
    });
    return {grad_x, weight_grad ? sum_of_chunk_rows(weight_partial) : torch::Tensor(),
            bias_grad ? sum_of_chunk_rows(bias_partial) : torch::Tensor(), torch::Tensor()};
  }
};

bool on_kernel(const torch::Tensor& t) { return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32; }

}  // namespace

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  const bool kernel = on_kernel(x) && x.dim() > 0 && on_kernel(weight) && on_kernel(bias) && weight.dim() == 1 &&
                      bias.dim() == 1 && weight.size(0) == x.size(-1) && bias.size(0) == x.size(-1);
  if (!kernel) return torch::layer_norm(x, {x.dim() ? x.size(-1) : 0}, weight, bias, eps);
  return LayerNorm::apply(x, weight, bias, eps);
}

torch::Tensor layer_norm(torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  const auto& options = norm->options;
  if (options.normalized_shape().size() != 1) return norm->forward(x);
  return layer_norm(x, norm->weight, norm->bias, options.eps());
}

}  // namespace pelab
