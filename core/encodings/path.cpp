#include "core/encodings/path.h"

#include <ATen/Parallel.h>

#include "core/encodings/kernel_views.h"
#include "core/kernels/path_transport.h"

namespace pelab {

namespace {

// The bias by the fused kernels (core/kernels/path_transport.h), float32 CPU.
struct PathBias : torch::autograd::Function<PathBias> {
  // q, k, w: (B, H, T, Dh); beta: (B, H, T) -> (B, H, T, T)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& w_in, const torch::Tensor& beta_in,
                               double scale) {
    const auto q = unit_last_stride(q_in), k = unit_last_stride(k_in), w = unit_last_stride(w_in);
    const auto beta = beta_in.contiguous();
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    auto products = torch::empty({dims.batch, dims.heads, dims.queries, dims.keys}, q.options());
    const kernels::PathInputs in{kernel_view(q), kernel_view(k), kernel_view(w), kernel_view(beta), static_cast<float>(scale)};
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::path_transport_forward(dims, begin, end, in, mutable_kernel_view(products));
    });
    context->save_for_backward({q, k, w, beta});
    context->saved_data["scale"] = scale;
    return products;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &w = saved[2], &beta = saved[3];
    const auto grad_products = unit_last_stride(gradients[0]);
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    auto grad_q = torch::empty(q.sizes(), q.options()), grad_k = torch::empty(k.sizes(), k.options()),
         grad_w = torch::empty(w.sizes(), w.options()), grad_beta = torch::empty(beta.sizes(), beta.options());
    const kernels::PathInputs in{kernel_view(q), kernel_view(k), kernel_view(w), kernel_view(beta),
                                 static_cast<float>(context->saved_data["scale"].toDouble())};
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::path_transport_backward(dims, begin, end, in, kernel_view(grad_products), mutable_kernel_view(grad_q),
                                       mutable_kernel_view(grad_k), mutable_kernel_view(grad_w), mutable_kernel_view(grad_beta));
    });
    return {grad_q, grad_k, grad_w, grad_beta, torch::Tensor()};
  }
};

}  // namespace

PathImpl::PathImpl(const EncodingContext& context, const OptionValues& options) : PositionEncodingImpl(context) {
  TORCH_CHECK(context.causal, "path is defined for causal attention only (the paper's transport runs from key to "
              "a later query); set model.causal: true");
  directions_ = register_module("directions", torch::nn::ModuleList());
  strengths_ = register_module("strengths", torch::nn::ModuleList());
  for (int64_t l = 0; l < context.num_layers; ++l) {
    directions_->push_back(linear_if(context.serves(l), context.d_model, context.attention_width(),
                                     options.get_bool("direction_bias")));
    strengths_->push_back(linear_if(context.serves(l), context.d_model, context.num_heads));
  }
}

std::string PathImpl::description() {
  return "PaTH (Yang et al. 2025): the key carried to the query through data-dependent Householder-like "
         "transformations I - beta w w^T of the tokens in between; causal only";
}

std::vector<OptionSpec> PathImpl::options() {
  return {OptionSpec::boolean("direction_bias", true,
                              "a bias in the direction projection W_w (false: none, as fla's w_proj; true keeps "
                              "the runs made before the option)")};
}

std::pair<torch::Tensor, torch::Tensor> PathImpl::transformations(const torch::Tensor& x, int64_t layer) {
  auto* direction = directions_[layer]->as<torch::nn::Linear>();
  auto* strength = strengths_[layer]->as<torch::nn::Linear>();
  TORCH_CHECK(direction && strength, "path: block ", layer, " is not one this scheme serves");
  const int64_t B = x.size(0), T = x.size(1), H = context().num_heads, Dh = context().head_dim();
  const auto w = direction->forward(x).to(torch::kFloat32).view({B, T, H, Dh}).transpose(1, 2);  // (B, H, T, Dh)
  const auto unit = w / w.norm(2, -1, true).clamp_min(1e-6);
  const auto beta = 2 * torch::sigmoid(strength->forward(x).to(torch::kFloat32)).transpose(1, 2);  // (B, H, T)
  return {unit, beta};
}

torch::Tensor PathImpl::transported_products(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                             const torch::Tensor& beta) {
  const int64_t T = q.size(2);
  const auto qf = q.to(torch::kFloat32), kf = k.to(torch::kFloat32);
  const auto positions = torch::arange(T, torch::TensorOptions(torch::kInt64).device(q.device())).view({1, 1, T, 1});
  torch::Tensor carried = kf;  // row j: k_j carried through H_{j+1} ... H_s (rows j >= s: not yet meaningful)
  std::vector<torch::Tensor> rows;
  for (int64_t s = 0; s < T; ++s) {
    const auto w_s = w.select(2, s).unsqueeze(2);                   // (B, H, 1, Dh)
    const auto beta_s = beta.select(2, s).unsqueeze(-1).unsqueeze(-1);  // (B, H, 1, 1)
    carried = carried - beta_s * (carried * w_s).sum(-1, true) * w_s;  // H_s applied to every row
    carried = torch::where(positions == s, kf, carried);            // key s starts here, untransformed
    rows.push_back((qf.select(2, s).unsqueeze(2) * carried).sum(-1));  // (B, H, T): q_s against every key
  }
  const auto products = torch::stack(rows, 2);  // (B, H, T, T)
  return products.tril();  // keys after the query: masked anyway
}

torch::Tensor PathImpl::bias_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                const torch::Tensor& beta, double scale) {
  if (q.device().is_cpu() && q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32)
    return PathBias::apply(q, k, w, beta, scale);
  const auto plain = torch::matmul(q.to(torch::kFloat32), k.to(torch::kFloat32).transpose(-2, -1)).tril();
  return ((transported_products(q, k, w, beta) - plain) * scale).to(q.scalar_type());
}

torch::Tensor PathImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  TORCH_CHECK(attention.input, "path: the transformations read the block's input, which this caller does not give");
  const auto [w, beta] = transformations(*attention.input, attention.layer);
  return bias_of(q, k, w, beta, attention_scale());
}

std::vector<ScoreTerm> PathImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                             const AttentionContext& attention) {
  return {{"transport", score_bias(q, k, attention)}};
}

}  // namespace pelab
