#include "core/encodings/layer_mix.h"

#include <cmath>

namespace pelab {

LayerMixImpl::LayerMixImpl(const EncodingContext& context, PositionEncoding main, PositionEncoding mixed,
                           int64_t every)
    : PositionEncodingImpl(context), main_(std::move(main)), mixed_(std::move(mixed)), every_(every) {
  TORCH_CHECK(every_ >= 1, "encoding_mix.every must be at least 1");
  TORCH_CHECK(std::abs(main_->attention_scale() - mixed_->attention_scale()) <= 1e-12 * main_->attention_scale(),
              "encoding_mix: '", main_->context().scheme, "' and '", mixed_->context().scheme,
              "' scale the scores differently (", main_->attention_scale(), " and ", mixed_->attention_scale(),
              "); mix schemes with the same attention scale");
  register_module("main", main_);
  register_module("mixed", mixed_);
}

void LayerMixImpl::check_positions(const Positions& positions) const {
  main_->check_positions(positions);
  mixed_->check_positions(positions);
}

torch::Tensor LayerMixImpl::embed(torch::Tensor x, const Positions& positions, int64_t layer) {
  return at(layer).embed(std::move(x), positions, layer);
}

std::pair<torch::Tensor, torch::Tensor> LayerMixImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                             const AttentionContext& attention) {
  return at(attention.layer).rotate(std::move(q), std::move(k), attention);
}

torch::Tensor LayerMixImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                       const AttentionContext& attention) {
  return at(attention.layer).score_bias(q, k, attention);
}

std::vector<ScoreTerm> LayerMixImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                 const AttentionContext& attention) {
  return at(attention.layer).score_terms(q, k, attention);
}

torch::Tensor LayerMixImpl::value_term(const torch::Tensor& probs, const AttentionContext& attention) {
  return at(attention.layer).value_term(probs, attention);
}

RelativeRows LayerMixImpl::relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                         const AttentionContext& attention) {
  return at(attention.layer).relative_rows(q, k, attention);
}

bool LayerMixImpl::supports_extrapolation() const {
  return main_->supports_extrapolation() || mixed_->supports_extrapolation();
}

void LayerMixImpl::set_extrapolation(const Extrapolation& extrapolation) {
  const bool none = extrapolation.method == "none";
  TORCH_CHECK(none || supports_extrapolation(), "this position encoding has no extrapolation method '",
              extrapolation.method, "'");
  for (auto* scheme : {main_.get(), mixed_.get()})  // a rotary scheme stretches, the other has nothing to
    if (scheme->supports_extrapolation() || none) scheme->set_extrapolation(extrapolation);
}

std::vector<PositionTable> LayerMixImpl::position_tables() const {
  std::vector<PositionTable> tables;
  for (const auto& [prefix, scheme] : {std::pair{"main.", main_.get()}, std::pair{"mixed.", mixed_.get()}})
    for (auto t : scheme->position_tables()) {
      t.parameter = prefix + t.parameter;
      tables.push_back(t);
    }
  return tables;
}

}  // namespace pelab
