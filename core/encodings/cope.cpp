#include "core/encodings/cope.h"

#include <ATen/Parallel.h>

#include "core/encodings/kernel_views.h"
#include "core/kernels/cope.h"

namespace pelab {

namespace {

// CoPE's bias by the fused kernels (core/kernels/cope.h), float32 CPU: the logits and the
// table's products as matrix products, the rest row by row.
struct CopeBias : torch::autograd::Function<CopeBias> {
  // q, k: (B, H, T, Dh); table: (rows, Dh) -> (B, H, T, T)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& table, int64_t limit, double scale,
                               bool causal) {
    const auto logits = torch::matmul(q * scale, k.transpose(-2, -1));  // (B, H, T, T)
    const auto products = torch::matmul(q, table.t());                   // (B, H, T, rows)
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    auto bias = torch::empty({dims.batch, dims.heads, dims.queries, dims.keys}, q.options());
    const kernels::CopeInputs in{kernel_view(logits), kernel_view(products), table.size(0), limit, causal};
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::cope_bias_forward(dims, begin, end, in, mutable_kernel_view(bias));
    });
    context->save_for_backward({q, k, table});
    context->saved_data["limit"] = limit;
    context->saved_data["scale"] = scale;
    context->saved_data["causal"] = causal;
    return bias;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &table = saved[2];
    const double scale = context->saved_data["scale"].toDouble();
    const auto grad_bias = unit_last_stride(gradients[0]);
    const auto logits = torch::matmul(q * scale, k.transpose(-2, -1));  // recomputed: nothing T x T was kept
    const auto products = torch::matmul(q, table.t());
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    const kernels::CopeInputs in{kernel_view(logits), kernel_view(products), table.size(0),
                                 context->saved_data["limit"].toInt(), context->saved_data["causal"].toBool()};
    auto grad_logits = torch::empty_like(logits), grad_products = torch::empty_like(products);
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::cope_bias_backward(dims, begin, end, in, kernel_view(grad_bias), mutable_kernel_view(grad_logits),
                                  mutable_kernel_view(grad_products));
    });
    // logits = scale q k^T, products = q e^T
    const auto grad_q = torch::matmul(grad_logits, k) * scale + torch::matmul(grad_products, table);
    const auto grad_k = torch::matmul(grad_logits.transpose(-2, -1), q) * scale;
    const auto grad_table = torch::matmul(grad_products.reshape({-1, table.size(0)}).t(), q.reshape({-1, q.size(-1)}));
    return {grad_q, grad_k, grad_table, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

CopeImpl::CopeImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), npos_max_(options.get_int("npos_max")) {
  const int64_t rows = context.causal ? npos_max_ : 2 * npos_max_ - 1;
  const bool normal = options.get_string("init") == "normal";
  for (int64_t l = 0; l < context.num_layers; ++l) {
    if (!context.serves(l)) {
      tables_.emplace_back();
      continue;
    }
    auto table = normal ? torch::randn({rows, context.head_dim()}) * 0.02 : torch::zeros({rows, context.head_dim()});
    tables_.push_back(register_parameter("table_" + std::to_string(l), table));
  }
}

std::string CopeImpl::description() {
  return "CoPE: positions counted by gates sigmoid(q.k) over the keys between query and key, "
         "interpolated embeddings added to the logits (causal; signed counts bidirectionally)";
}

std::vector<OptionSpec> CopeImpl::options() {
  return {
      OptionSpec::integer("npos_max", 64, "counts are clamped below this; table rows (per direction)", 2, 1 << 20),
      OptionSpec::choice("init", "zeros", {"zeros", "normal"}, "initial tables: zeros (the reference) or N(0, 0.02^2)"),
  };
}

torch::Tensor CopeImpl::contextual_positions(const torch::Tensor& q, const torch::Tensor& k) const {
  TORCH_CHECK(q.size(2) == k.size(2), "cope: queries and keys must be the same tokens, got ", q.size(2), " and ",
              k.size(2));
  const int64_t T = q.size(2);
  // (B, H, T, T), in float32 also under autocast: counts need the fractions
  const auto gates = torch::sigmoid(torch::matmul(q * attention_scale(), k.transpose(-2, -1)).to(torch::kFloat32));
  const auto at_or_before = torch::ones({T, T}, gates.options().dtype(torch::kBool)).tril();  // j <= i
  // sum_{t=j..i} g_it = sum_{t>=j} of the gates of keys t <= i: a reverse cumulative sum
  const auto before = (gates * at_or_before).flip(-1).cumsum(-1).flip(-1);
  if (context_.causal) return before.clamp_max(static_cast<double>(npos_max_ - 1));
  // j > i: -sum_{t=i..j} g_it, a cumulative sum of the gates of keys t >= i
  const auto after = (gates * at_or_before.t()).cumsum(-1);  // at_or_before.t(): j >= i
  const double limit = static_cast<double>(npos_max_ - 1);
  return torch::where(at_or_before, before, -after).clamp(-limit, limit);
}

torch::Tensor CopeImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const auto& table = tables_.at(attention.layer);
  if (q.device().is_cpu() && q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
      q.size(2) == k.size(2))
    return CopeBias::apply(q, k, table.to(torch::kFloat32), npos_max_ - 1, attention_scale(), context_.causal);
  return unfused_bias(q, k, table);
}

torch::Tensor CopeImpl::unfused_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& table) const {
  // Row of each (fractional) count: counts start at row 0 causally, at row npos_max - 1 otherwise.
  const auto rows = contextual_positions(q, k) + (context_.causal ? 0.0 : static_cast<double>(npos_max_ - 1));
  const auto floor = rows.floor();
  const auto weight = rows - floor;  // w: gradients reach the gates (and so q, k) through it
  const auto lower = floor.to(torch::kInt64);
  const auto upper = rows.ceil().to(torch::kInt64);
  const auto per_row = torch::matmul(q, table.to(q.scalar_type()).t());  // (B, H, T, rows): q_i . e[r]
  return per_row.gather(-1, upper) * weight + per_row.gather(-1, lower) * (1 - weight);
}

}  // namespace pelab
