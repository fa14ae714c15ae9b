// `dape`: Data-Adaptive Positional Encoding (Zheng et al. 2024, "DAPE: Data-Adaptive Positional
// Encoding for Length Extrapolation", arXiv 2405.14722; chuanyang-Zheng/DAPE, DAPE.py
// AliBi_DAPE and ParallelKerpleLog_DAPE). A static bias B (ALiBi, KERPLE or FIRE: option
// `bias`, that scheme at its defaults) and, per block, an MLP over the heads that reads each
// (query, key) pair's scaled logits and static biases together:
//   scores = A + B + f([A, B]),  A = q k^T / sqrt(Dh),  f: Linear(2H, width) -> LeakyReLU ->
//   Linear(width, H), applied to the 2H numbers of every pair
// so the bias adapts to the content. As the reference, B enters twice (alone and through f)
// and f sees the logits of masked keys too (its output there is masked; f acts on each pair
// alone, so nothing leaks). Bidirectional mode uses the static scheme's symmetric form (the
// reference is causal). Cost: one more q k^T and the MLP over a (B, T, T, 2H) tensor per block.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class DapeImpl : public PositionEncodingImpl {
 public:
  DapeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  void check_positions(const Positions& positions) const override { static_bias_->validate_positions(positions); }
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // "static bias" (B) and "adaptive bias" (f([A, B]))
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  bool shift_invariant() const override { return static_bias_->shift_invariant(); }
  std::vector<PositionTable> position_tables() const override;

 private:
  PositionEncoding static_bias_{nullptr};
  torch::nn::ModuleList mlp_in_{nullptr}, mlp_out_{nullptr};  // per block (placeholders where not served)
};

}  // namespace pelab
