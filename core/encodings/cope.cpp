#include "core/encodings/cope.h"

#include <ATen/Parallel.h>

#include <algorithm>

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

// Query rows per block of the attention below: a block's (rows, T) logits stay near 256 KB
// (in the L2 cache beside the probabilities and gradients of the backward).
int64_t rows_per_block(int64_t T) { return std::clamp<int64_t>((int64_t{64} << 10) / std::max<int64_t>(T, 1), 16, 128); }

// One (batch, head) pair's tensors and a block of its query rows, as the row kernels take them.
struct PairBlocks {
  const kernels::AttentionDims& dims;
  const torch::Tensor& products;  // (B, H, T, rows)
  kernels::Strided mask;
  int64_t limit;
  bool causal;
  kernels::CopeRowBlock block(int64_t b, int64_t h, int64_t first, int64_t count) const {
    kernels::CopeRowBlock out;
    out.first = first;
    out.count = count;
    out.queries = dims.queries;
    out.rows = products.size(-1);
    out.limit = limit;
    out.causal = causal;
    out.products = products.data_ptr<float>() + ((b * dims.heads + h) * dims.queries + first) * out.rows;
    if (mask.data) {
      out.mask = mask.at(b, 0, first);
      out.mask_stride = mask.row;
    }
    return out;
  }
};

// The rows [first, first + count) of a contiguous (T, C) matrix, and a (count, width) matrix
// made contiguous at the start of a scratch buffer.
torch::Tensor rows_of(const torch::Tensor& m, int64_t first, int64_t count) { return m.narrow(0, first, count); }
torch::Tensor scratch_matrix(const torch::Tensor& scratch, int64_t count, int64_t width) {
  return scratch.narrow(0, 0, count * width).view({count, width});
}

// CoPE's whole attention by the row kernels (core/kernels/cope.h), float32 CPU, a block of
// query rows of one (batch, head) pair at a time: the block's logits by a matrix product, the
// softmax of logits + bias + mask by the kernel, the output by another product. Nothing
// (B, H, T, T) is made; the backward recomputes each block's logits from q and k.
struct CopeAttention : torch::autograd::Function<CopeAttention> {
  // q, k, v: (B, H, T, Dh); table: (rows, Dh); mask: additive (B|1, 1, T|1, T) or empty -> (B, H, T, Dh)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, const torch::Tensor& table_in,
                               const torch::Tensor& mask_in, int64_t limit, double scale, bool causal) {
    const auto q = q_in.detach().contiguous(), k = k_in.detach().contiguous(), v = v_in.detach().contiguous();
    const auto table = table_in.detach().contiguous();
    const auto mask = mask_in.numel() > 0 ? unit_last_stride(mask_in.detach().to(torch::kFloat32)) : mask_in;
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    const auto scaled_q = q * scale;
    const auto products = torch::matmul(q, table.t()).contiguous();  // (B, H, T, rows): q_i . e[r]
    auto out = torch::empty(q.sizes(), q.options());
    auto lse = torch::empty({dims.batch, dims.heads, dims.queries}, q.options());
    const PairBlocks pairs{dims, products, kernel_view(mask), limit, causal};
    const int64_t block_rows = rows_per_block(dims.queries);
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      at::NoGradGuard no_grad;  // worker threads: mm_out refuses outputs of tensors that need grad
      const auto scratch = torch::empty({block_rows * dims.keys}, q.options());
      for (int64_t pair = begin; pair < end; ++pair) {
        const int64_t b = pair / dims.heads, h = pair % dims.heads;
        const auto qs = scaled_q[b][h], kp = k[b][h], vp = v[b][h], op = out[b][h];
        for (int64_t first = 0; first < dims.queries; first += block_rows) {
          const auto block = pairs.block(b, h, first, std::min(block_rows, dims.queries - first));
          auto z = scratch_matrix(scratch, block.count, block.width());
          at::mm_out(z, rows_of(qs, first, block.count), rows_of(kp, 0, block.width()).t());
          kernels::cope_attention_rows_forward(block, z.data_ptr<float>(), block.width(),
                                               lse[b][h].data_ptr<float>() + first);
          auto out_rows = rows_of(op, first, block.count);
          at::mm_out(out_rows, z, rows_of(vp, 0, block.width()));
        }
      }
    });
    context->save_for_backward({q, k, v, table, mask, out, lse});
    context->saved_data["limit"] = limit;
    context->saved_data["scale"] = scale;
    context->saved_data["causal"] = causal;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &table = saved[3], &mask = saved[4], &out = saved[5],
               &lse = saved[6];
    const double scale = context->saved_data["scale"].toDouble();
    const auto grad_out = gradients[0].contiguous();
    const kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    const auto scaled_q = q * scale;
    const auto products = torch::matmul(q, table.t()).contiguous();
    const auto delta = (grad_out * out).sum(-1).contiguous();  // (B, H, T): dout_i . out_i
    auto grad_q = torch::empty(q.sizes(), q.options()), grad_k = torch::zeros(k.sizes(), k.options()),
         grad_v = torch::zeros(v.sizes(), v.options());
    auto grad_products = torch::empty(products.sizes(), products.options());
    const PairBlocks pairs{dims, products, kernel_view(mask), context->saved_data["limit"].toInt(),
                           context->saved_data["causal"].toBool()};
    const int64_t block_rows = rows_per_block(dims.queries);
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      at::NoGradGuard no_grad;
      const auto scratch_logits = torch::empty({block_rows * dims.keys}, q.options()),
                 scratch_grad = torch::empty_like(scratch_logits), scratch_probabilities = torch::empty_like(scratch_logits);
      for (int64_t pair = begin; pair < end; ++pair) {
        const int64_t b = pair / dims.heads, h = pair % dims.heads;
        const auto qp = q[b][h], qs = scaled_q[b][h], kp = k[b][h], vp = v[b][h], dout = grad_out[b][h];
        auto dq = grad_q[b][h], dk = grad_k[b][h], dv = grad_v[b][h];
        for (int64_t first = 0; first < dims.queries; first += block_rows) {
          const auto block = pairs.block(b, h, first, std::min(block_rows, dims.queries - first));
          const int64_t width = block.width();
          auto z = scratch_matrix(scratch_logits, block.count, width), dz = scratch_matrix(scratch_grad, block.count, width),
               a = scratch_matrix(scratch_probabilities, block.count, width);
          const auto q_rows = rows_of(qp, first, block.count), dout_rows = rows_of(dout, first, block.count);
          const auto k_keys = rows_of(kp, 0, width), v_keys = rows_of(vp, 0, width);
          at::mm_out(z, rows_of(qs, first, block.count), k_keys.t());
          at::mm_out(dz, dout_rows, v_keys.t());  // dout_i . v_j, turned into z's gradient
          kernels::cope_attention_rows_backward(
              block, z.data_ptr<float>(), dz.data_ptr<float>(), width, lse[b][h].data_ptr<float>() + first,
              delta[b][h].data_ptr<float>() + first, a.data_ptr<float>(),
              grad_products[b][h].data_ptr<float>() + first * block.rows);
          rows_of(dv, 0, width).addmm_(a.t(), dout_rows);
          auto dq_rows = rows_of(dq, first, block.count);
          at::mm_out(dq_rows, dz, k_keys);             // times scale below
          rows_of(dk, 0, width).addmm_(dz.t(), q_rows);  // times scale below
        }
      }
    });
    // z = scale q k^T, products = q e^T
    grad_q = grad_q * scale + torch::matmul(grad_products, table);
    grad_k = grad_k * scale;
    const auto grad_table =
        torch::matmul(grad_products.reshape({-1, table.size(0)}).t(), q.reshape({-1, q.size(-1)}));
    return {grad_q, grad_k, grad_v, grad_table, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
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

torch::Tensor CopeImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& key_mask, const AttentionContext& attention) {
  const bool float32 = q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
                       v.scalar_type() == torch::kFloat32;
  if (!q.device().is_cpu() || !float32 || q.size(2) != k.size(2) || q.sizes() != v.sizes()) return {};
  TORCH_CHECK(!key_mask.defined() || (key_mask.dim() == 4 && key_mask.size(1) == 1 && key_mask.size(3) == k.size(2)),
              "cope: key_mask must be (B|1, 1, T|1, T), got ", key_mask.sizes());
  const auto absent = torch::empty({0}, q.options());
  return CopeAttention::apply(q, k, v, tables_.at(attention.layer).to(torch::kFloat32),
                              key_mask.defined() ? key_mask : absent, npos_max_ - 1, attention_scale(), context_.causal);
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
