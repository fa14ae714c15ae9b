// Two schemes across depth (encoding_mix): blocks every-1, 2 every-1, ... use `mixed`, the
// other blocks and the token embeddings `main`. SmolLM3 and Llama 4 drop RoPE from every
// fourth layer (Yang et al. 2025, "RoPE to NoRoPE and Back Again"): `rope` with `none`
// every 4. Every hook goes to the scheme of the block it is called for; the two must scale
// scores alike (attention_scale() has no layer). Not registered: the encoder builds it.
#pragma once

#include "core/encodings/position_encoding.h"

namespace pelab {

class LayerMixImpl : public PositionEncodingImpl {
 public:
  LayerMixImpl(const EncodingContext& context, PositionEncoding main, PositionEncoding mixed, int64_t every);

  // Whether block `layer` (kInputLayer: the token embeddings) uses the mixed scheme.
  static bool mixed_block(int64_t layer, int64_t every) { return layer != kInputLayer && (layer + 1) % every == 0; }
  bool mixed_at(int64_t layer) const { return mixed_block(layer, every_); }

  void check_positions(const Positions& positions) const override;
  torch::Tensor embed(torch::Tensor x, const Positions& positions, int64_t layer) override;
  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  torch::Tensor value_term(const torch::Tensor& probs, const AttentionContext& attention) override;
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  bool has_value_term() const override { return main_->has_value_term() || mixed_->has_value_term(); }
  bool has_value_term_at(int64_t layer) const override {
    return (mixed_at(layer) ? mixed_ : main_)->has_value_term_at(layer);
  }
  bool replaces_softmax() const override { return main_->replaces_softmax() || mixed_->replaces_softmax(); }
  bool replaces_softmax_at(int64_t layer) const override {
    return (mixed_at(layer) ? mixed_ : main_)->replaces_softmax_at(layer);
  }
  torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                  const AttentionContext& attention) override {
    return (mixed_at(attention.layer) ? mixed_ : main_)->attention_weights(scores, masked, attention);
  }
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_mask, const AttentionContext& attention) override {
    return at(attention.layer).attend(q, k, v, key_mask, attention);
  }
  double attention_scale() const override { return main_->attention_scale(); }
  bool supports_extrapolation() const override;
  void set_extrapolation(const Extrapolation& extrapolation) override;
  bool adds_to_residual() const override { return main_->adds_to_residual() || mixed_->adds_to_residual(); }
  bool shift_invariant() const override { return main_->shift_invariant() && mixed_->shift_invariant(); }
  std::vector<PositionTable> position_tables() const override;

 private:
  PositionEncodingImpl& at(int64_t layer) { return mixed_at(layer) ? *mixed_ : *main_; }

  PositionEncoding main_, mixed_;
  int64_t every_;
};

}  // namespace pelab
