// `rope`: rotary position embedding (Su et al. 2021, "RoFormer"; x-transformers
// RotaryEmbedding, DeepMind randomized_positional_encodings apply_rotary_encoding, GPT-NeoX /
// LLaMA rotate_half). q and k of position p are rotated by p * base^(-2i/R); q.k then
// depends on the offset query - key only. Layouts, rotary fraction and evaluation-time
// extrapolation: core/encodings/rotary.h. No parameters. Two variants are options:
//   p-RoPE (Barbero et al. 2025, "Round and Round We Go!"): spectrum: head with
//     rotary_fraction p rotates the first pairs at base^(-2i/Dh), the highest fraction p of
//     the full head's frequencies, and leaves the lowest out (rotary_fraction alone spreads
//     the whole spectrum base^(-2i/R) over the rotated part)
//   HoPE (Chen et al. 2024, "HoPE: A Novel Positional Encoding Without Long-Term Decay"):
//     min_turn_length L leaves unrotated the pairs with theta_i L < 2 pi, which do not turn
//     once over the training length; the rest rotate as RoPE
// and two evaluation-time extrapolation methods (eval.extrapolation; Su 2023, "ReRoPE",
// bojone/rerope), on offsets d = query - key beyond a window w (rerope_window; 0: L - 1, the
// longest offset training saw, L the training length in tokens):
//   rerope        q.k at offset min(|d|, w) sign(d): distances beyond the window clamped to it
//   leaky_rerope  at offset (w + (|d| - w) / k) sign(d) beyond it: slowed by k (rerope_leak; 0:
//                 (T - 1 - w) / (L - 1 - w), the longest test offset at L - 1; with w >= L - 1,
//                 T - 1 - w, the longest at w + 1: give a window below L - 1 for leaky_rerope)
// Both as a dense bias: rotate leaves q and k as projected, score_bias adds the whole rotary
// score minus q.k (two or three score maps per block: evaluation only).
#pragma once

#include "core/encodings/rotary.h"

namespace pelab {

class RopeImpl : public RotaryImpl {
 public:
  RopeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

 private:
  bool rerope() const { return is_rerope(extrapolation_.method); }
  // The window w and the leak k of the current evaluation.
  std::pair<double, double> rerope_window_and_leak(int64_t test_tokens) const;

  double rerope_window_, rerope_leak_;
};

}  // namespace pelab
