#include "core/model/fused_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <mutex>

#include "core/encodings/heads_layout.h"
#include "core/encodings/kernel_views.h"
#include "core/kernels/attention.h"

namespace pelab {

namespace {

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

// A relative table (checked: check_relative_rows), ascending offsets -> contiguous,
// descending (as the kernels read it); an empty tensor stays empty (absent).
torch::Tensor descending_table(const torch::Tensor& t) {
  return t.numel() == 0 ? t : t.to(torch::kFloat32).flip(-2).contiguous();
}

// RelativeRows::runs (checked: check_relative_rows) -> int32, in the tables' descending
// order and counted from their descending first row (the kernels' runs); an empty tensor
// stays empty (no runs).
torch::Tensor descending_runs(const torch::Tensor& runs) {
  if (runs.numel() == 0) return runs;
  const auto ascending = runs.to(torch::kInt64);
  return (ascending[-1] - ascending.flip(0)).to(torch::kInt32).contiguous();
}

// The number of runs (rows per table) of descending_runs' result; 0: no runs.
int64_t run_count(const torch::Tensor& descending_runs) {
  return descending_runs.numel() > 0 ? descending_runs[-1].item<int64_t>() + 1 : 0;
}

kernels::OffsetTable table_view(const torch::Tensor& descending) {
  if (descending.numel() == 0) return {};
  return {descending.data_ptr<float>(), descending.dim() == 3 ? descending.stride(0) : 0};
}

// Inputs of the autograd function, in its argument order after q, k, v, bias, mask.
enum RelativeInput { kQueryRows, kKeyRows, kValueRows, kRelativeInputs };

// The kernels' view of the checked inputs: rows descending (kRelativeInputs of them); an
// undefined bias or mask and an empty table or offset query are absent.
kernels::AttentionInputs kernel_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       double scale, const torch::Tensor& bias, const torch::Tensor& mask,
                                       const std::vector<torch::Tensor>& rows, const torch::Tensor& offset_query,
                                       int64_t clip, const torch::Tensor& runs, bool causal,
                                       const kernels::AttentionDropout& dropout) {
  return {kernel_view(q),
          kernel_view(k),
          kernel_view(v),
          static_cast<float>(scale),
          kernel_view(bias),
          kernel_view(mask),
          table_view(rows[kQueryRows]),
          table_view(rows[kKeyRows]),
          table_view(rows[kValueRows]),
          offset_query.numel() > 0 ? kernel_view(offset_query) : kernels::Strided{},
          clip,
          runs.numel() > 0 ? runs.data_ptr<int32_t>() : nullptr,
          run_count(runs),
          causal,
          dropout};
}

std::atomic<int64_t> forward_count{0};

// The dropout the autograd function's arguments describe (a custom function takes no structs).
kernels::AttentionDropout dropout_of(int64_t key, int64_t threshold, double keep_scale) {
  return {static_cast<uint64_t>(key), static_cast<uint32_t>(threshold), static_cast<float>(keep_scale)};
}

// A zero gradient shaped like a table, or none for an absent (empty) one.
torch::Tensor zero_gradient(const torch::Tensor& table) {
  return table.numel() > 0 ? torch::zeros_like(table) : torch::Tensor();
}

// qkv: (B, T, 3 H Dh), whose thirds along the last dimension are q, k and v -> three
// (B, H, T, Dh) views of it (as a projection's output is split into heads).
std::array<torch::Tensor, 3> split_packed(const torch::Tensor& qkv, int64_t heads) {
  TORCH_CHECK(qkv.dim() == 3 && heads > 0 && qkv.size(2) % (3 * heads) == 0,
              "fused_attention_packed: expected qkv (B, T, 3 H Dh) for H = ", heads, " heads, got ", qkv.sizes());
  const auto parts = qkv.view({qkv.size(0), qkv.size(1), 3, heads, qkv.size(2) / (3 * heads)}).unbind(2);
  return {parts[0].transpose(1, 2), parts[1].transpose(1, 2), parts[2].transpose(1, 2)};
}

struct FusedAttention : torch::autograd::Function<FusedAttention> {
  // q: (B, H, Tq, Dh), k, v: (B, H, Tk, Dh); or, with packed_heads = H > 0, q_in the packed
  // (B, T, 3 H Dh) and k_in, v_in empty (split_packed); rows: (H|-, 2T - 1, Dh) ascending or
  // empty (or one per run: runs_in, RelativeRows::runs, or empty); offset_query: (B, H, T,
  // Dh) or empty; causal: keys after the query masked too -> (B, H, Tq, Dh) (memory (B, Tq,
  // H, Dh))
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, const torch::Tensor& bias_in,
                               const torch::Tensor& mask_in, const torch::Tensor& query_rows_in,
                               const torch::Tensor& key_rows_in, const torch::Tensor& value_rows_in,
                               const torch::Tensor& offset_query_in, const torch::Tensor& runs_in, double scale,
                               int64_t clip, int64_t packed_heads, bool causal, int64_t dropout_key,
                               int64_t dropout_threshold, double dropout_keep_scale) {
    const auto split = packed_heads > 0 ? split_packed(q_in, packed_heads) : std::array{q_in, k_in, v_in};
    TORCH_CHECK(split[0].dim() == 4 && split[1].dim() == 4 && split[2].dim() == 4,
                "fused_attention: q, k, v must be (B, H, T, Dh)");
    const auto q = unit_last_stride(split[0]), k = unit_last_stride(split[1]), v = unit_last_stride(split[2]);
    kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == dims.batch && k.size(1) == dims.heads &&
                    k.size(3) == dims.head_dim,
                "fused_attention: shapes differ: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
    const auto bias = additive_table(bias_in, "bias", dims.batch, dims.heads, dims.queries, dims.keys);
    const auto mask = additive_table(mask_in, "mask", dims.batch, dims.heads, dims.queries, dims.keys);
    TORCH_CHECK(!causal || dims.queries == dims.keys, "fused_attention: a causal mask needs as many queries as keys, got ",
                dims.queries, " and ", dims.keys);
    // the relative rows were checked by fused_attention / fused_attention_packed
    const auto runs = descending_runs(runs_in);  // int32, descending
    std::vector<torch::Tensor> rows;             // descending, as the kernels read them
    for (const auto* table : {&query_rows_in, &key_rows_in, &value_rows_in}) rows.push_back(descending_table(*table));
    const auto offset_query = offset_query_in.numel() > 0 ? unit_last_stride(offset_query_in) : offset_query_in;

    const auto dropout = dropout_of(dropout_key, dropout_threshold, dropout_keep_scale);
    const auto in = kernel_inputs(q, k, v, scale, bias, mask, rows, offset_query, clip, runs, causal, dropout);
    RECORD_FUNCTION("pelab::fused_attention_forward", std::vector<c10::IValue>());  // for pelab bench --trace
    ++forward_count;
    auto probs = torch::empty({dims.batch, dims.heads, dims.queries, kernels::probability_row_stride(dims.keys)},
                              q.options());
    auto out = torch::empty({dims.batch, dims.queries, dims.heads, dims.head_dim}, q.options());
    const kernels::MutableStrided out_view{out.data_ptr<float>(), out.stride(0), out.stride(2), out.stride(1)};
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      kernels::attention_forward(dims, begin, end, in, probs.data_ptr<float>(), out_view);
    });
    context->save_for_backward({q, k, v, rows[kQueryRows], rows[kKeyRows], rows[kValueRows], offset_query, runs});
    context->saved_data["probs"] = probs;
    context->saved_data["scale"] = scale;
    context->saved_data["clip"] = clip;
    context->saved_data["causal"] = causal;
    context->saved_data["dropout_threshold"] = dropout_threshold;  // the decisions are in probs' signs
    context->saved_data["dropout_keep_scale"] = dropout_keep_scale;
    context->saved_data["packed_heads"] = packed_heads;
    context->saved_data["bias_sizes"] = bias_in.sizes().vec();
    context->saved_data["bias_table_sizes"] = bias.defined() ? bias.sizes().vec() : std::vector<int64_t>();
    return out.permute({0, 2, 1, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &offset_query = saved[6], &runs = saved[7];
    const std::vector<torch::Tensor> rows = {saved[3], saved[4], saved[5]};
    const bool separate_offset_query = offset_query.numel() > 0;
    const auto probs = context->saved_data["probs"].toTensor();
    const double scale = context->saved_data["scale"].toDouble();
    const auto grad_out = unit_last_stride(gradients[0]);
    kernels::AttentionDims dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
    const auto dropout = dropout_of(0, context->saved_data["dropout_threshold"].toInt(),
                                    context->saved_data["dropout_keep_scale"].toDouble());
    const auto in =
        kernel_inputs(q, k, v, scale, {}, {}, rows, offset_query, context->saved_data["clip"].toInt(), runs,
                      context->saved_data["causal"].toBool(), dropout);
    // q, k, v's gradients in (B, T, H, Dh) memory, as the projection's output has them: the
    // heads merge back into (B, T, D) without a copy; packed, the three are views of the
    // packed input's gradient (no concatenation afterwards)
    const int64_t packed_heads = context->saved_data["packed_heads"].toInt();
    torch::Tensor grad_packed, grad_q, grad_k, grad_v;
    if (packed_heads > 0) {
      grad_packed = torch::empty({dims.batch, dims.queries, 3 * dims.heads * dims.head_dim}, q.options());
      const auto parts = split_packed(grad_packed, packed_heads);
      grad_q = parts[0], grad_k = parts[1], grad_v = parts[2];
    } else {
      grad_q = empty_heads_last(q), grad_k = empty_heads_last(k), grad_v = empty_heads_last(v);
    }
    // The bias's gradient, shaped like its 4-D table (B|1, H|1, Tq|1, Tk): a table that
    // broadcasts gets the sum over the cells sharing each element, accumulated by each thread
    // into a zeroed table of its own (the first to finish hands over its table as the result)
    const bool bias_needs_grad = context->needs_input_grad(3);  // an absent bias never does
    const auto bias_table_sizes = context->saved_data["bias_table_sizes"].toIntVector();
    const bool bias_broadcasts =
        bias_needs_grad && (bias_table_sizes[0] == 1 || bias_table_sizes[1] == 1 || bias_table_sizes[2] == 1);
    torch::Tensor grad_bias, grad_offset_query;
    if (bias_needs_grad && !bias_broadcasts) grad_bias = torch::empty(bias_table_sizes, q.options());
    if (separate_offset_query) grad_offset_query = torch::empty(q.sizes(), q.options());
    std::vector<torch::Tensor> grad_rows;  // descending, summed over the threads
    for (const auto& table : rows) grad_rows.push_back(zero_gradient(table));
    std::mutex sum_shares;
    at::parallel_for(0, dims.batch * dims.heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<torch::Tensor> mine;  // this thread's share of the tables' gradients
      for (const auto& table : rows) mine.push_back(zero_gradient(table));
      const auto my_bias = bias_broadcasts ? torch::zeros(bias_table_sizes, q.options()) : grad_bias;
      auto pointer = [](const torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; };
      kernels::AttentionGradients grad;
      grad.q = mutable_kernel_view(grad_q);
      grad.k = mutable_kernel_view(grad_k);
      grad.v = mutable_kernel_view(grad_v);
      if (my_bias.defined()) {
        auto stride = [&](int64_t d) { return my_bias.size(d) == 1 ? 0 : my_bias.stride(d); };
        grad.bias = {my_bias.data_ptr<float>(), stride(0), stride(1), stride(2)};
      }
      grad.offset_query = pointer(grad_offset_query);
      grad.query_rows = pointer(mine[kQueryRows]);
      grad.key_rows = pointer(mine[kKeyRows]);
      grad.value_rows = pointer(mine[kValueRows]);
      kernels::attention_backward(dims, begin, end, in, probs.data_ptr<float>(), kernel_view(grad_out), grad);
      std::lock_guard<std::mutex> lock(sum_shares);
      for (int r = 0; r < kRelativeInputs; ++r)
        if (mine[r].defined()) grad_rows[r].add_(mine[r]);
      if (bias_broadcasts) grad_bias = grad_bias.defined() ? grad_bias.add_(my_bias) : my_bias;
    });
    if (bias_needs_grad) grad_bias = grad_bias.view(context->saved_data["bias_sizes"].toIntVector());
    for (auto& g : grad_rows)
      if (g.defined()) g = g.flip(-2);  // back to ascending offsets
    return {packed_heads > 0 ? grad_packed : grad_q,
            grad_k,
            grad_v,
            grad_bias,
            torch::Tensor(),
            grad_rows[kQueryRows],
            grad_rows[kKeyRows],
            grad_rows[kValueRows],
            grad_offset_query,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool fused_attention_supports(const torch::Tensor& q) {
  return q.device().is_cpu() && q.scalar_type() == torch::kFloat32;
}

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                              const torch::Tensor& bias, const AttentionMask& mask, const RelativeRows& relative,
                              const kernels::AttentionDropout& dropout) {
  TORCH_CHECK(fused_attention_supports(q) && fused_attention_supports(k) && fused_attention_supports(v),
              "fused_attention: q, k and v must be float32 CPU tensors");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4, "fused_attention: q, k, v must be (B, H, T, Dh)");
  check_relative_rows(relative, "fused_attention", q.sizes(), k.size(2));
  // LibTorch 1.13's custom functions take no undefined tensors: an empty one stands for none
  const auto absent = torch::empty({0}, q.options());
  auto or_absent = [&](const torch::Tensor& t) { return t.defined() ? t : absent; };
  return FusedAttention::apply(q, k, v, or_absent(bias), or_absent(mask.kernel_mask()), or_absent(relative.query),
                               or_absent(relative.key), or_absent(relative.value), or_absent(relative.offset_query),
                               or_absent(relative.runs), scale, relative.clip, int64_t{0}, mask.causal(),
                               static_cast<int64_t>(dropout.key), static_cast<int64_t>(dropout.threshold),
                               static_cast<double>(dropout.keep_scale));
}

torch::Tensor fused_attention_packed(const torch::Tensor& qkv, int64_t heads, double scale, const torch::Tensor& bias,
                                     const AttentionMask& mask, const RelativeRows& relative,
                                     const kernels::AttentionDropout& dropout) {
  TORCH_CHECK(fused_attention_supports(qkv), "fused_attention_packed: qkv must be a float32 CPU tensor");
  const auto q = split_packed(qkv, heads)[0];  // checks the shape
  check_relative_rows(relative, "fused_attention", q.sizes(), q.size(2));
  const auto absent = torch::empty({0}, qkv.options());
  auto or_absent = [&](const torch::Tensor& t) { return t.defined() ? t : absent; };
  return FusedAttention::apply(qkv, absent, absent, or_absent(bias), or_absent(mask.kernel_mask()),
                               or_absent(relative.query), or_absent(relative.key), or_absent(relative.value),
                               or_absent(relative.offset_query), or_absent(relative.runs), scale, relative.clip, heads,
                               mask.causal(), static_cast<int64_t>(dropout.key), static_cast<int64_t>(dropout.threshold),
                               static_cast<double>(dropout.keep_scale));
}

int64_t fused_attention_forward_count() { return forward_count.load(); }

}  // namespace pelab
