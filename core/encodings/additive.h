// Base of additive absolute encodings (sinusoidal, learned): a vector per position added
// to the token embeddings (`inject: input`, as BERT and Vaswani et al.) or to the residual
// stream before every block (`inject: every_layer`, after the embedding LayerNorm, the
// same vectors each time, or a scheme's own per-block form: learned's `per_layer` tables,
// sinusoidal's `every_layer_scaled`). Subclasses only say which vector a position gets.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class AdditivePositionEncodingImpl : public PositionEncodingImpl {
 public:
  AdditivePositionEncodingImpl(const EncodingContext& context, const OptionValues& options);
  // The `inject` option every additive scheme declares: input, every_layer, and the
  // scheme's own per-block forms (`more`, each with its help after the common one).
  static OptionSpec inject_option(const std::vector<std::string>& more = {}, const std::string& more_help = "");

  // x: (B, T, D) -> x + position_vectors at the layers this scheme injects at.
  torch::Tensor embed(torch::Tensor x, const Positions& positions, int64_t layer) override;
  bool shift_invariant() const override { return false; }  // a vector per absolute position
  bool adds_to_residual() const override { return true; }

 protected:
  // positions: (B, T) int64 -> (B, T, D) float32, for block `layer` (kInputLayer: the
  // token embeddings)
  virtual torch::Tensor position_vectors(const torch::Tensor& positions, int64_t layer) = 0;
  const std::string& inject() const { return inject_; }

 private:
  std::string inject_;
};

}  // namespace pelab
