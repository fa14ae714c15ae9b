// Multi-head self-attention with the position-encoding hooks at fixed places.
#pragma once

#include <torch/torch.h>

#include "core/encodings/position_encoding.h"
#include "core/model/attention_mask.h"

namespace pelab {

// What a forward keeps of one attention layer for analysis, when asked (ForwardRequest).
struct AttentionRecord {
  bool keep_scores = false;  // asked: keep the parts of the scores below, not only probs
  torch::Tensor probs;       // (B, H, T, T)
  // The parts of the scores (core/analysis/score_terms.h): scores = q k^T * scale + the
  // sum of bias_terms, before the mask.
  torch::Tensor input;                 // (B, T, D): what the attention projected (after pre-LN)
  torch::Tensor qkv_weight, qkv_bias;  // (3D, D), (3D)
  torch::Tensor q, k;                  // (B, H, T, Dh), after rotate
  bool rotated = false;                // whether rotate changed q or k
  double scale = 1.0;
  std::vector<ScoreTerm> bias_terms;   // the scheme's score_terms
  // model.logit_scaling: the scores are this times the sum of the terms, (B|1, H|1, T, 1);
  // undefined: 1
  torch::Tensor logit_factor;
};

// model.logit_scaling and its settings (core/config/config.h, ModelConfig).
struct LogitScaling {
  std::string name = "none";  // none | log_length | ssmax | constant | per_head | llama4
  double ssmax_init = 0.43, logit_scale = 1.0, llama4_floor_scale = 8192, llama4_scale = 0.1;
};

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  // scaling: model.logit_scaling and its settings (config.h)
  MultiHeadAttentionImpl(int64_t d_model, int64_t num_heads, double attention_dropout, int64_t layer,
                         const LogitScaling& scaling = {});

  // x: (B, T, D); mask: which keys each query may not see; -> (B, T, D).
  // When `record` is given it receives the attention probabilities (and the parts of the
  // scores, when it asks).
  torch::Tensor forward(const torch::Tensor& x, const AttentionMask& mask, const Positions& positions,
                        PositionEncodingImpl& encoding, AttentionRecord* record = nullptr);

 private:
  // Each query's factor under model.logit_scaling, n the keys it may see: log n (times s per
  // head for ssmax), the constant, s per head, Llama 4's 1 + scale log(floor(n / floor) + 1);
  // (B|1, H|1, T|1, 1), or undefined for none.
  torch::Tensor logit_factor(const AttentionMask& mask, int64_t T, torch::Device device) const;

  int64_t num_heads_, layer_;
  LogitScaling scaling_;
  torch::Tensor head_scale_;  // (H,): ssmax's s or per_head's s, per head
  torch::nn::Linear qkv_{nullptr}, out_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

// Tests: with LibTorch >= 2, take the scaled_dot_product_attention branch (the GPU's) on the
// CPU too, wherever the scheme allows it, instead of the fused kernel; process-wide.
void use_sdpa_on_cpu(bool on);

}  // namespace pelab
