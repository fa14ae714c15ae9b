#include "core/model/attention.h"

#include <torch/version.h>

#include <atomic>
#include <cmath>

#include "core/model/attention_dropout.h"
#include "core/model/batched_matmul.h"
#include "core/model/fused_attention.h"
#include "core/model/sdpa_backend.h"

namespace pelab {

namespace {
std::atomic<bool> sdpa_on_cpu{false};
}  // namespace

void use_sdpa_on_cpu(bool on) { sdpa_on_cpu = on; }

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t d_model, int64_t num_heads, double attention_dropout,
                                               int64_t layer, const LogitScaling& scaling)
    : num_heads_(num_heads), layer_(layer), scaling_(scaling) {
  TORCH_CHECK(d_model % num_heads == 0, "num_heads = ", num_heads, " does not divide d_model = ", d_model);
  if (scaling_.name == "ssmax") head_scale_ = register_parameter("ssmax_scale", torch::full({num_heads}, scaling_.ssmax_init));
  if (scaling_.name == "per_head")
    head_scale_ = register_parameter("logit_scale", torch::full({num_heads}, scaling_.logit_scale));
  qkv_ = register_module("qkv", torch::nn::Linear(d_model, 3 * d_model));
  out_ = register_module("out", torch::nn::Linear(d_model, d_model));
  dropout_ = register_module("dropout", torch::nn::Dropout(attention_dropout));
}

torch::Tensor MultiHeadAttentionImpl::logit_factor(const AttentionMask& mask, int64_t T, torch::Device device) const {
  const std::string& name = scaling_.name;
  if (name == "none") return {};
  const auto f32 = torch::TensorOptions(torch::kFloat32).device(device);
  if (name == "constant") return torch::full({1, 1, 1, 1}, scaling_.logit_scale, f32);
  if (name == "per_head") return head_scale_.view({1, num_heads_, 1, 1});
  // n: the keys each query may see, (B|1, 1, T, 1)
  const torch::Tensor visible = mask.any() ? torch::isfinite(mask.additive()).sum(-1, true).to(torch::kFloat32)
                                           : torch::full({1, 1, T, 1}, static_cast<float>(T),
                                                         torch::TensorOptions(torch::kFloat32).device(device));
  // Llama 4 (HF Llama4TextAttention, attn_temperature_tuning): 1 + scale log(floor((p + 1) / floor_scale) + 1)
  // of the query's position p; n = p + 1 in causal attention over contiguous positions
  if (name == "llama4")
    return 1 + scaling_.llama4_scale * (torch::floor(visible / scaling_.llama4_floor_scale) + 1).log();
  // a query that sees one key: 0, attention to it is 1 regardless (none: a row masked whole)
  const torch::Tensor factor = visible.clamp_min(1).log();
  return name == "ssmax" ? factor * head_scale_.view({1, num_heads_, 1, 1}) : factor;
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& x, const AttentionMask& mask,
                                              const Positions& positions, PositionEncodingImpl& encoding,
                                              AttentionRecord* record) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = num_heads_, Dh = D / H;
  // project: (B, T, 3D) -> 3 x (B, H, T, Dh), views. (Split, not indexed: the backward of an
  // index makes a zero (B, T, 3D) gradient for each of q, k, v and adds them; a split's
  // concatenates.)
  const auto projection = qkv_->forward(x);  // (B, T, 3D)
  const auto projected = projection.chunk(3, -1);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, Dh}).transpose(1, 2); };
  const torch::Tensor projected_q = heads(projected[0]), projected_k = heads(projected[1]);
  torch::Tensor q = projected_q, k = projected_k, v = heads(projected[2]);
  const AttentionContext hooks{positions, layer_, qkv_->weight, qkv_->bias, &x};
  std::tie(q, k) = encoding.rotate(q, k, hooks);
  const bool rotated = !q.is_same(projected_q) || !k.is_same(projected_k);
  if (record && record->keep_scores) {
    record->input = x;
    record->qkv_weight = qkv_->weight;
    record->qkv_bias = qkv_->bias;
    record->q = q;
    record->k = k;
    record->rotated = rotated;
    record->scale = encoding.attention_scale();
    record->bias_terms = encoding.score_terms(q, k, hooks);
    record->logit_factor = logit_factor(mask, T, x.device());
  }

  // The fused CPU kernel keeps no probabilities for callers; it computes a value term only
  // from a scheme's relative rows. Attention dropout on the CPU: one key from the run's
  // generator decides the dropped probabilities of the fused and the unfused path alike
  // (core/model/attention_dropout.h); elsewhere (GPUs, SDPA) LibTorch's own dropout.
  const double dropout_rate = is_training() ? dropout_->options.p() : 0.0;
  const bool cpu_dropout = dropout_rate > 0.0 && q.device().is_cpu() && !sdpa_on_cpu.load();
  const auto dropout = cpu_dropout ? kernels::attention_dropout(dropout_rate, draw_attention_dropout_key())
                                   : kernels::AttentionDropout();
  // model.logit_scaling scales each query's row by its own factor: the unfused path only
  const bool scaled = scaling_.name != "none";
  const bool softmax = !encoding.replaces_softmax_at(layer_);  // else the scheme's weights (stick-breaking)
  // a scheme may widen q and k past v (pope: 2 Dh): the fused kernel and SDPA take one head size
  const bool one_head_size = q.size(-1) == v.size(-1);
  const bool value_term = encoding.has_value_term_at(layer_);
  // a scheme's own kernel (stick-breaking's and CoPE's on the CPU): the whole output, no
  // (B, H, T, T) tensor; asked first, and the scheme's other hooks are then not called
  const torch::Tensor own = !record && !scaled && dropout_rate == 0.0 && !value_term && !sdpa_on_cpu.load()
                                ? encoding.attend(q, k, v, mask.kernel_mask(), hooks)
                                : torch::Tensor();
  const bool fusable = !own.defined() && !record && !scaled && softmax && one_head_size &&
                       fused_attention_supports(q) && !sdpa_on_cpu.load();
  const auto relative = fusable ? encoding.checked_relative_rows(q, k, hooks) : RelativeRows();
  const bool fused = fusable && (relative.defined() || !value_term);
  const auto bias = own.defined() ? torch::Tensor()
                    : relative.defined() ? relative.bias
                                         : encoding.score_bias(q, k, hooks);
  // GPUs (LibTorch >= 2): SDPA's fused kernels, the kernel chosen by pelab's rule
  // (core/model/sdpa_backend.h); only where no map is kept and the scheme has no value term
  const bool sdpa_allowed = TORCH_VERSION_MAJOR >= 2 && !own.defined() && !fused && !record && !value_term &&
                            !scaled && softmax && one_head_size && (!q.device().is_cpu() || sdpa_on_cpu.load());
  const bool only_causal = mask.only_causal() && !bias.defined();
  const SdpaBackend sdpa_backend =
      sdpa_allowed ? choose_sdpa_backend({q.is_cuda(), q.scalar_type(), bias.defined() || (mask.any() && !only_causal), Dh})
                   : SdpaBackend::unfused;
  torch::Tensor context;  // (B, H, T, Dh)
  if (own.defined()) {
    context = own;
  } else if (fused) {
    // core/model/fused_attention.h, with the scheme's relative rows if any; memory (B, T, H, Dh).
    // Unrotated q, k, v are still the projection's thirds: passed packed, their gradients
    // come back as one (B, T, 3D) tensor, not three that the split's backward concatenates.
    context = rotated ? fused_attention(q, k, v, encoding.attention_scale(), bias, mask, relative, dropout)
                      : fused_attention_packed(projection, H, encoding.attention_scale(), bias, mask, relative, dropout);
#if TORCH_VERSION_MAJOR >= 2
  } else if (sdpa_backend != SdpaBackend::unfused) {
    // bias + mask as one additive mask, or, causal with nothing else to add, is_causal (the
    // flash kernel accepts that, not a mask). SDPA scales by 1/sqrt(Dh): q is pre-scaled to
    // give attention_scale(). Both cast first: under bf16 autocast the (B, H, T, T) sum is
    // then written once, in bf16 (adding a mask of 0 and -inf is exact in any dtype).
    const auto dtype = q.scalar_type();
    const torch::Tensor masked = only_causal ? torch::Tensor() : mask.additive();
    c10::optional<torch::Tensor> additive;  // none: no bias and no masked key, or only_causal
    if (bias.defined() && masked.defined()) additive = bias.to(dtype) + masked.to(dtype);
    else if (bias.defined()) additive = bias.to(dtype);
    else if (masked.defined()) additive = masked.to(dtype);
    const auto q_scaled = q * (encoding.attention_scale() * std::sqrt(static_cast<double>(Dh)));
    context = with_sdpa_backend(sdpa_backend, [&] {
      return at::scaled_dot_product_attention(q_scaled, k, v, additive, dropout_rate, only_causal);
    });
#endif
  } else {
    // Scale q (T x Dh numbers) rather than the scores (T x T); the hooks see the unscaled q.
    auto scores = batch_parallel_matmul(q * encoding.attention_scale(), k.transpose(-2, -1));  // (B, H, T, T)
    if (bias.defined()) scores.add_(bias);  // in place: no backward needs the raw scores
    // before the mask: a factor of 0 (one key seen) must not meet -inf
    if (scaled)
      scores = scores * (record && record->logit_factor.defined() ? record->logit_factor : logit_factor(mask, T, x.device()));
    torch::Tensor probs;
    if (softmax) {
      if (mask.any()) scores.add_(mask.additive());
      probs = torch::softmax(scores, -1);
    } else {
      probs = encoding.attention_weights(scores, mask.any() ? torch::isinf(mask.additive()) : torch::Tensor(), hooks);
    }
    if (record) record->probs = probs;

    auto attended = dropout.active() ? probs * attention_dropout_multipliers(B, H, T, T, dropout).to(probs.scalar_type())
                                     : dropout_->forward(probs);
    context = batch_parallel_matmul(attended, v);
    auto value_term = encoding.value_term(attended, hooks);
    if (value_term.defined()) context = context + value_term;
  }
  return out_->forward(context.transpose(1, 2).reshape({B, T, D}));
}

}  // namespace pelab
