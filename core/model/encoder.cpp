#include "core/model/encoder.h"

#include "core/encodings/head_groups.h"
#include "core/encodings/layer_mix.h"
#include "core/encodings/registry.h"
#include "core/model/gelu.h"
#include "core/model/layer_norm.h"
#include "core/model/run_generator.h"

namespace pelab {

BlockImpl::BlockImpl(const ModelConfig& c, int64_t layer)
    : pre_norm_(c.norm == "pre"), gelu_(c.activation == "gelu") {
  // logit_scaling_blocks: global: the blocks attending locally scale nothing (Llama 4: the
  // temperature on its global NoPE layers only)
  const bool scaled = c.logit_scaling_blocks == "all" || !local_block(c, layer);
  attention_ = register_module("attention",
                               MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout, layer,
                                                  LogitScaling{scaled ? c.logit_scaling : "none", c.ssmax_init,
                                                               c.logit_scale, c.llama4_floor_scale, c.llama4_scale}));
  auto norm_options = torch::nn::LayerNormOptions({c.d_model}).eps(c.layer_norm_eps);
  norm1_ = register_module("norm1", torch::nn::LayerNorm(norm_options));
  norm2_ = register_module("norm2", torch::nn::LayerNorm(norm_options));
  ff_in_ = register_module("ff_in", torch::nn::Linear(c.d_model, c.d_ff));
  ff_out_ = register_module("ff_out", torch::nn::Linear(c.d_ff, c.d_model));
  dropout_ = register_module("dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor BlockImpl::forward(torch::Tensor x, const AttentionMask& mask, const Positions& positions,
                                 PositionEncodingImpl& encoding, AttentionRecord* record) {
  // dropout from the run's own CPU stream (core/model/run_generator.h)
  auto drop = [&](const torch::Tensor& t) { return run_dropout(t, dropout_->options.p(), is_training()); };
  auto feed_forward = [&](const torch::Tensor& h) {
    // GELU takes ff_in's bias into its own pass (core/model/gelu.h): h W^T here, + b there
    auto hidden = gelu_ ? gelu_activation(torch::nn::functional::linear(h, ff_in_->weight), ff_in_->bias)
                        : torch::relu(ff_in_->forward(h));
    return drop(ff_out_->forward(hidden));
  };
  if (pre_norm_) {
    x = x + drop(attention_->forward(layer_norm(norm1_, x), mask, positions, encoding, record));
    return x + feed_forward(layer_norm(norm2_, x));
  }
  x = layer_norm(norm1_, x + drop(attention_->forward(x, mask, positions, encoding, record)));
  return layer_norm(norm2_, x + feed_forward(x));
}

namespace {

// The scheme of `encoding`, or with head groups, a HeadGroups of theirs, for `context`
// (its served blocks).
PositionEncoding main_scheme(const EncodingConfig& encoding, const std::vector<HeadGroupConfig>& heads,
                             const EncodingContext& context) {
  if (heads.empty()) return make_position_encoding(encoding.name, context, encoding.options);
  std::vector<PositionEncoding> groups;
  for (const auto& group : heads) {
    EncodingContext group_context = context;
    group_context.scheme = group.encoding.name;
    group_context.num_heads = group.heads;
    group_context.model_heads = context.num_heads;
    groups.push_back(make_position_encoding(group.encoding.name, group_context, group.encoding.options));
  }
  return PositionEncoding(std::shared_ptr<PositionEncodingImpl>(std::make_shared<HeadGroupsImpl>(context, groups)));
}

}  // namespace

EncoderImpl::EncoderImpl(const ModelConfig& model, const EncodingConfig& encoding, int64_t vocab_size,
                         int64_t num_classes, const EncodingMixConfig& mix, const std::vector<HeadGroupConfig>& heads)
    : config_(model) {
  TORCH_CHECK(heads.empty() || encoding.name == "none", "encoding_heads replace encoding, which must be none, not '",
              encoding.name, "'");
  token_embedding_ = register_module(
      "token_embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_size, model.d_model)
                                                  .padding_idx(kPadToken)));
  if (model.embedding_init_std != 1.0) {  // 1: LibTorch's own N(0, 1), and its random draws, kept
    torch::NoGradGuard no_grad;
    token_embedding_->weight.normal_(0.0, model.embedding_init_std);
    token_embedding_->weight[kPadToken].zero_();
  }
  if (model.embedding_scale == "sqrt_d_model") token_scale_ = std::sqrt(double(model.d_model));
  if (model.segment_embeddings)
    segment_embedding_ = register_module("segment_embedding", torch::nn::Embedding(2, model.d_model));
  auto norm_options = torch::nn::LayerNormOptions({model.d_model}).eps(model.layer_norm_eps);
  if (model.embedding_layer_norm)
    embedding_norm_ = register_module("embedding_norm", torch::nn::LayerNorm(norm_options));
  dropout_ = register_module("dropout", torch::nn::Dropout(model.dropout));
  EncodingContext context{model.d_model, model.num_heads, model.num_layers, model.causal, encoding.name};
  PositionEncoding scheme{nullptr};
  if (mix.every > 0) {
    // each scheme makes per-block parameters only for the blocks it serves
    EncodingContext main_context = context, mixed_context = context;
    mixed_context.scheme = mix.encoding.name;
    for (int64_t l = 0; l < model.num_layers; ++l) {
      main_context.served.push_back(!LayerMixImpl::mixed_block(l, mix.every));
      mixed_context.served.push_back(LayerMixImpl::mixed_block(l, mix.every));
    }
    PositionEncoding main = main_scheme(encoding, heads, main_context);
    scheme = PositionEncoding(std::shared_ptr<PositionEncodingImpl>(std::make_shared<LayerMixImpl>(
        context, main, make_position_encoding(mix.encoding.name, mixed_context, mix.encoding.options), mix.every)));
  } else {
    scheme = main_scheme(encoding, heads, context);
  }
  position_encoding_ = register_module("position_encoding", scheme);
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < model.num_layers; ++l) blocks_->push_back(Block(model, l));
  if (model.norm == "pre") final_norm_ = register_module("final_norm", torch::nn::LayerNorm(norm_options));
  head_ = register_module("head", torch::nn::Linear(model.d_model, num_classes));
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& tokens, const torch::Tensor& padding,
                                   const Positions& positions, const torch::Tensor& segments,
                                   const ForwardRequest& request) {
  TORCH_CHECK(tokens.dim() == 2, "tokens must be (B, T), got ", tokens.sizes());
  TORCH_CHECK(!padding.defined() || padding.sizes() == tokens.sizes(), "padding ", padding.sizes(),
              " must match tokens ", tokens.sizes());
  TORCH_CHECK(positions.query.sizes() == tokens.sizes() && positions.key.sizes() == tokens.sizes(),
              "positions must be (B, T) like tokens ", tokens.sizes());
  position_encoding_->validate_positions(positions);

  EncoderOutput out;
  auto x = token_embedding_->forward(tokens);  // (B, T, D)
  if (token_scale_ != 1.0) x = x * token_scale_;
  if (segment_embedding_) {
    x = x + segment_embedding_->forward(segments.defined() ? segments : torch::zeros_like(tokens));
  }
  if (request.position_embeddings) x = position_encoding_->embed(x, positions, kInputLayer);
  if (embedding_norm_) x = layer_norm(embedding_norm_, x);
  x = run_dropout(x, dropout_->options.p(), is_training());  // the run's own CPU stream
  if (request.hidden_states) out.hidden_states.push_back(x);

  const AttentionMask mask = padding.defined() ? AttentionMask(padding, config_.causal)
                                               : AttentionMask(tokens.size(1), config_.causal, tokens.device());
  // model.window / model.chunk: the blocks that attend locally share one restricted mask
  const AttentionMask local_mask = mask.restricted({config_.window, config_.chunk});
  for (int64_t l = 0; l < static_cast<int64_t>(blocks_->size()); ++l) {
    if (request.position_embeddings) x = position_encoding_->embed(x, positions, l);
    AttentionRecord record;
    record.keep_scores = request.score_parts;
    const bool keep = request.attentions || request.score_parts;
    x = blocks_[l]->as<Block>()->forward(x, local_block(config_, l) ? local_mask : mask, positions,
                                         *position_encoding_, keep ? &record : nullptr);
    if (request.attentions) out.attentions.push_back(record.probs);
    if (request.score_parts) out.score_parts.push_back(std::move(record));
    if (request.hidden_states) out.hidden_states.push_back(x);
  }
  if (final_norm_) x = layer_norm(final_norm_, x);
  out.logits = head_->forward(x);
  return out;
}

}  // namespace pelab
