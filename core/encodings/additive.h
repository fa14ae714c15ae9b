// Base of additive absolute encodings (sinusoidal, learned): a vector per position added
// to the token embeddings (`inject: input`, as BERT and Vaswani et al.) or to the residual
// stream before every block (`inject: every_layer`, after the embedding LayerNorm, the
// same vectors each time). Subclasses only say which vector a position gets.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class AdditivePositionEncodingImpl : public PositionEncodingImpl {
 public:
  AdditivePositionEncodingImpl(const EncodingContext& context, const OptionValues& options);
  // The `inject` option every additive scheme declares.
  static OptionSpec inject_option();

  // x: (B, T, D) -> x + position_vectors at the layers this scheme injects at.
  torch::Tensor embed(torch::Tensor x, const Positions& positions, int64_t layer) override;
  bool shift_invariant() const override { return false; }  // a vector per absolute position

 protected:
  // positions: (B, T) int64 -> (B, T, D) float32
  virtual torch::Tensor position_vectors(const torch::Tensor& positions) = 0;

 private:
  bool every_layer_;
};

}  // namespace pelab
