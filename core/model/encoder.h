// The shared transformer encoder every scheme plugs into: token (+ segment) embeddings,
// embedding LayerNorm and dropout, N blocks (pre-LN or post-LN, bidirectional or causal),
// and a per-position output head.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "core/encodings/position_encoding.h"
#include "core/config/config.h"
#include "core/model/attention.h"

namespace pelab {

// Token id 0 is padding everywhere in pelab: its embedding row is zero and stays zero.
constexpr int64_t kPadToken = 0;

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& config, int64_t layer);
  // x: (B, T, D) -> (B, T, D); mask: restricted to local keys where the block attends locally
  torch::Tensor forward(torch::Tensor x, const AttentionMask& mask, const Positions& positions,
                        PositionEncodingImpl& encoding, AttentionRecord* record);

 private:
  bool pre_norm_, gelu_;
  MultiHeadAttention attention_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Linear ff_in_{nullptr}, ff_out_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Block);

struct ForwardRequest {
  bool attentions = false;     // keep every layer's attention probabilities
  bool hidden_states = false;  // keep the embedding output and every layer's output
  bool score_parts = false;    // keep every layer's AttentionRecord (the parts of its scores)
  bool position_embeddings = true;  // false: skip the scheme's embed hook (the analysis's content-only forward)
};

struct EncoderOutput {
  torch::Tensor logits;                      // (B, T, num_classes)
  std::vector<torch::Tensor> attentions;     // num_layers x (B, H, T, T), when requested
  std::vector<torch::Tensor> hidden_states;  // (num_layers + 1) x (B, T, D), when requested
  std::vector<AttentionRecord> score_parts;  // num_layers, when requested
};

class EncoderImpl : public torch::nn::Module {
 public:
  // `mix`: some blocks with another scheme (encoding_mix; core/encodings/layer_mix.h);
  // `heads`: non-empty, the blocks of `encoding` split their heads into these groups
  // (encoding_heads; core/encodings/head_groups.h), `encoding` then being none
  EncoderImpl(const ModelConfig& model, const EncodingConfig& encoding, int64_t vocab_size,
              int64_t num_classes, const EncodingMixConfig& mix = {},
              const std::vector<HeadGroupConfig>& heads = {});

  // tokens: (B, T) int64; padding: (B, T) bool, true at padding, or undefined when the caller
  // knows that no token is (nothing is read back from the device to find out); segments:
  // (B, T) int64 or undefined (all zero). -> logits (B, T, C) and what `request` asks for.
  EncoderOutput forward(const torch::Tensor& tokens, const torch::Tensor& padding,
                        const Positions& positions, const torch::Tensor& segments = {},
                        const ForwardRequest& request = {});

  const ModelConfig& config() const { return config_; }
  PositionEncodingImpl& encoding() { return *position_encoding_; }

 private:
  ModelConfig config_;
  double token_scale_ = 1.0;  // model.embedding_scale: sqrt(d_model) or 1
  torch::nn::Embedding token_embedding_{nullptr}, segment_embedding_{nullptr};
  torch::nn::LayerNorm embedding_norm_{nullptr}, final_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  PositionEncoding position_encoding_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Encoder);

}  // namespace pelab
