#include "core/encodings/path.h"

#include <ATen/Parallel.h>

#include "core/encodings/kernel_views.h"
#include "core/encodings/path_chunks.h"
#include "core/kernels/path_transport.h"

namespace pelab {

namespace {

// The bias on the CPU in float32: the row kernels (core/kernels/path_transport.h) below
// path_chunks::kRowsBelow tokens, where their few short recurrences beat the chunks' many small
// matrix products; the chunked form (core/encodings/path_chunks.h) from there on.
// The row kernels' inputs: q, k, w with unit stride along Dh, beta contiguous, and their views
struct RowKernelInputs {
  torch::Tensor q, k, w, beta;
  kernels::AttentionDims dims;
  kernels::PathInputs in;
  RowKernelInputs(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& w_in,
                  const torch::Tensor& beta_in, double scale)
      : q(unit_last_stride(q_in)), k(unit_last_stride(k_in)), w(unit_last_stride(w_in)), beta(beta_in.contiguous()),
        dims{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)},
        in{kernel_view(q), kernel_view(k), kernel_view(w), kernel_view(beta), static_cast<float>(scale)} {}
  int64_t pairs() const { return dims.batch * dims.heads; }
};

torch::Tensor rows_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, const torch::Tensor& beta,
                        double scale) {
  const RowKernelInputs r(q, k, w, beta, scale);
  auto bias = torch::empty({r.dims.batch, r.dims.heads, r.dims.queries, r.dims.keys}, r.q.options());
  at::parallel_for(0, r.pairs(), 1, [&](int64_t begin, int64_t end) {
    kernels::path_transport_forward(r.dims, begin, end, r.in, mutable_kernel_view(bias));
  });
  return bias;
}

torch::autograd::variable_list rows_bias_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                                  const torch::Tensor& beta, const torch::Tensor& grad_bias,
                                                  double scale) {
  const RowKernelInputs r(q, k, w, beta, scale);
  const auto grad = unit_last_stride(grad_bias);
  auto grad_q = torch::empty(r.q.sizes(), r.q.options()), grad_k = torch::empty(r.k.sizes(), r.k.options()),
       grad_w = torch::empty(r.w.sizes(), r.w.options()), grad_beta = torch::empty(r.beta.sizes(), r.beta.options());
  at::parallel_for(0, r.pairs(), 1, [&](int64_t begin, int64_t end) {
    kernels::path_transport_backward(r.dims, begin, end, r.in, kernel_view(grad), mutable_kernel_view(grad_q),
                                     mutable_kernel_view(grad_k), mutable_kernel_view(grad_w),
                                     mutable_kernel_view(grad_beta));
  });
  return {grad_q, grad_k, grad_w, grad_beta};
}

struct PathBias : torch::autograd::Function<PathBias> {
  // q, k, w: (B, H, T, Dh); beta: (B, H, T) -> (B, H, T, T)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& w, const torch::Tensor& beta,
                               double scale) {
    context->save_for_backward({q, k, w, beta});
    context->saved_data["scale"] = scale;
    const int64_t T = q.size(2);
    if (T < path_chunks::kRowsBelow) return rows_bias(q, k, w, beta, scale);
    return path_chunks::bias_forward(q, k, w, beta, scale, path_chunks::chunk_for(T));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &w = saved[2], &beta = saved[3];
    const double scale = context->saved_data["scale"].toDouble();
    const int64_t T = q.size(2);
    torch::autograd::variable_list grads;
    if (T < path_chunks::kRowsBelow) {
      grads = rows_bias_backward(q, k, w, beta, gradients[0], scale);
    } else {
      const auto chunked = path_chunks::bias_backward(q, k, w, beta, gradients[0], scale, path_chunks::chunk_for(T));
      grads.assign(chunked.begin(), chunked.end());
    }
    grads.emplace_back();  // scale
    return grads;
  }
};

// PaTH's whole attention on the CPU in float32 (path_chunks::attention_forward): no (B, H, T, T)
// tensor; the backward recomputes the scores.
struct PathAttention : torch::autograd::Function<PathAttention> {
  // q, k, v, w: (B, H, T, Dh); beta: (B, H, T); mask: additive (B|1, 1, T|1, T) or empty -> (B, H, T, Dh)
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& w,
                               const torch::Tensor& beta, const torch::Tensor& mask, double scale) {
    const int64_t chunk = path_chunks::chunk_for(q.size(2));
    auto [out, lse] = path_chunks::attention_forward(q, k, v, w, beta, mask, scale, chunk);
    context->save_for_backward({q, k, v, w, beta, mask, out, lse});
    context->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto s = context->get_saved_variables();
    const auto grads = path_chunks::attention_backward(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], gradients[0],
                                                       context->saved_data["scale"].toDouble(),
                                                       path_chunks::chunk_for(s[0].size(2)));
    return {grads[0], grads[1], grads[2], grads[3], grads[4], torch::Tensor(), torch::Tensor()};
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

torch::Tensor PathImpl::chunked_bias(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& w_in,
                                    const torch::Tensor& beta_in, double scale, int64_t chunk) {
  TORCH_CHECK(chunk > 0, "path: the chunk size must be positive, got ", chunk);
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), Dh = q_in.size(3);
  const int64_t C = std::min(chunk, T), n = (T + C - 1) / C, padded = n * C;
  // Padding tokens after the last one change nothing before them (the transport runs forward):
  // w = 0 makes their H the identity.
  auto pad = [&](const torch::Tensor& x) {
    const auto f = x.to(torch::kFloat32);
    return padded == T ? f : torch::constant_pad_nd(f, {0, 0, 0, padded - T});
  };
  const auto q = pad(q_in), k = pad(k_in), w = pad(w_in);
  const auto beta = padded == T ? beta_in.to(torch::kFloat32)
                                : torch::constant_pad_nd(beta_in.to(torch::kFloat32), {0, padded - T});
  const auto options = q.options();
  // Every chunk at once: (B, H, n, C, Dh), beta (B, H, n, C, 1)
  const auto qc = q.view({B, H, n, C, Dh}), kc = k.view({B, H, n, C, Dh}), wc = w.view({B, H, n, C, Dh});
  const auto bc = beta.view({B, H, n, C, 1});
  // The UT transform: inside a chunk, H_t ... H_(j+1) y = y - sum_(j<t'<=t) v_t' w_t' with
  // v_t = beta_t (w_t . y - sum_(j<t'<t) (w_t . w_t') v_t'), a unit lower triangular solve
  //   (I + beta tril(W W^T, -1)) V = beta (W y)   (rows t of the chunk)
  // solved at once for the chunk's keys (y = k_j, from t > j: U) and for the basis (y = e_d,
  // from the chunk's start: Wt, so that H_t ... H_s = I - sum_(t'<=t) w_t' Wt_t'^T).
  const auto eye_c = torch::eye(C, options);
  const auto system = eye_c + bc * torch::matmul(wc, wc.transpose(-2, -1)).tril(-1);  // (B, H, n, C, C)
  const auto rhs = torch::cat({bc * torch::matmul(wc, kc.transpose(-2, -1)).tril(-1), bc * wc}, -1);
  const auto solved = torch::linalg_solve_triangular(system, rhs, /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  const auto u = solved.narrow(-1, 0, C);         // (B, H, n, C, C): U_tj, 0 unless t > j
  const auto basis = solved.narrow(-1, C, Dh);    // (B, H, n, C, Dh)
  const auto qw = torch::matmul(qc, wc.transpose(-2, -1)).tril();  // q_i . w_t for t <= i
  // inside the chunk: S_ij - q_i . k_j = -sum_(j<t<=i) (q_i . w_t) U_tj (0 on and above the diagonal)
  const auto inside = torch::matmul(qw, u) * (-scale);                                  // (B, H, n, C, C)
  // keys carried to their chunk's end, queries back to their chunk's start, each chunk's whole transport
  const auto keys_out = (kc - torch::matmul(u.transpose(-2, -1), wc)) * scale;           // (B, H, n, C, Dh)
  const auto queries_in = qc - torch::matmul(qw, basis);                                  // (B, H, n, C, Dh)
  const auto transport = torch::eye(Dh, options) - torch::matmul(wc.transpose(-2, -1), basis);  // (B, H, n, Dh, Dh)
  // Between chunks: score_ij = queries_in_i^T P_(c_i - 1) ... P_(c_j + 1) keys_out_j, P_c the
  // transport of chunk c. The key chunks from the last down; `rows` holds the queries of every
  // later chunk carried back to just after key chunk c.
  std::vector<torch::Tensor> strips(n);  // strip c: (B, H, padded, C), key columns of chunk c
  torch::Tensor rows;
  for (int64_t c = n - 1; c >= 0; --c) {
    std::vector<torch::Tensor> parts;
    if (c > 0) parts.push_back(torch::zeros({B, H, c * C, C}, options));  // keys after the queries
    parts.push_back(inside.select(2, c));
    if (c < n - 1) {
      const auto next = queries_in.select(2, c + 1);
      rows = rows.defined() ? torch::cat({next, torch::matmul(rows, transport.select(2, c + 1))}, 2) : next;
      const auto plain = q.narrow(2, (c + 1) * C, padded - (c + 1) * C);
      parts.push_back(torch::matmul(rows, keys_out.select(2, c).transpose(-2, -1)) -
                      torch::matmul(plain, kc.select(2, c).transpose(-2, -1)) * scale);
    }
    strips[c] = torch::cat(parts, 2);
  }
  auto bias = torch::stack(strips, 3).view({B, H, padded, padded});
  if (padded != T) bias = bias.narrow(2, 0, T).narrow(3, 0, T).contiguous();
  return bias.to(q_in.scalar_type());
}

torch::Tensor PathImpl::bias_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                const torch::Tensor& beta, double scale) {
  if (q.device().is_cpu() && q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32)
    return PathBias::apply(q, k, w, beta, scale);
  // elsewhere (the GPU; other dtypes) by torch operations, chunked_bias's default chunks of 64:
  // T / 64 sequential steps
  return chunked_bias(q, k, w, beta, scale);
}

torch::Tensor PathImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  TORCH_CHECK(attention.input, "path: the transformations read the block's input, which this caller does not give");
  const auto [w, beta] = transformations(*attention.input, attention.layer);
  return bias_of(q, k, w, beta, attention_scale());
}

torch::Tensor PathImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& key_mask, const AttentionContext& attention) {
  const bool float32 = q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
                       v.scalar_type() == torch::kFloat32;
  // below kRowsBelow tokens the bias by the row kernels and the fused attention are faster
  if (!q.device().is_cpu() || !float32 || !attention.input || q.size(2) != k.size(2) || q.sizes() != v.sizes() ||
      q.size(2) < path_chunks::kRowsBelow)
    return {};
  const auto [w, beta] = transformations(*attention.input, attention.layer);
  const auto mask = key_mask.defined() ? key_mask : torch::empty({0}, q.options());
  return PathAttention::apply(q, k, v, w, beta, mask, attention_scale());
}

std::vector<ScoreTerm> PathImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                             const AttentionContext& attention) {
  return {{"transport", score_bias(q, k, attention)}};
}

}  // namespace pelab
