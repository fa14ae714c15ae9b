// Rotary machinery shared by `rope` and `xpos`: rotate pairs of q and k features by
// position * base^(-2i/R) (Su et al. 2021, RoFormer), on the first R dimensions of each head.
//   interleaved pairs (x0, x1), (x2, x3), ...       RoFormer, x-transformers, DeepMind
//   half split pairs  (x_i, x_{i + R/2})            GPT-NeoX, LLaMA
// Evaluation-time extrapolation by factor s = test / training sequence length, in tokens (s > 1
// only), L = the training length in tokens, T = s L the test length, pair i of R/2:
//   interpolation: positions / s                    (Chen et al. 2023, position interpolation)
//   ntk:           base * s^(R / (R - 2))            (NTK-aware scaling, bloc97 2023)
//   yarn:          NTK-by-parts (Peng et al. 2023, "YaRN"; HF rope_utils _compute_yarn_parameters):
//                  theta_i = (1 - g_i) theta_i / s + g_i theta_i with the ramp
//                  g_i = 1 - clamp((i - low) / (high - low), 0, 1), low = max(floor(d(beta_fast)), 0),
//                  high = min(ceil(d(beta_slow)), R - 1), d(b) = R ln(L / (2 pi b)) / (2 ln base);
//                  cos and sin times 0.1 ln s + 1, so q.k times (0.1 ln s + 1)^2 (the paper's sqrt(1/t))
//   dynamic_ntk:   base * (alpha T / L - (alpha - 1))^(R / (R - 2)) (HF _compute_dynamic_ntk_parameters,
//                  alpha = dynamic_ntk_factor; alpha = 1 is `ntk`)
// The methods change the rotation (and YaRN's temperature) only: xpos's decay is unchanged.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

// rerope or leaky_rerope: the extrapolation methods of `rope` alone (RopeImpl::score_bias).
inline bool is_rerope(const std::string& method) { return method == "rerope" || method == "leaky_rerope"; }

// The extrapolation hyperparameters every rotary scheme declares as options.
struct RotaryExtrapolationOptions {
  double yarn_beta_fast = 32, yarn_beta_slow = 1, dynamic_ntk_factor = 2;
  static std::vector<OptionSpec> specs();
  static RotaryExtrapolationOptions from(const OptionValues& options);
};

class RotaryImpl : public PositionEncodingImpl {
 public:
  RotaryImpl(const EncodingContext& context, int64_t rotary_dims, bool interleaved, double base,
             const RotaryExtrapolationOptions& extrapolation_options);

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  bool supports_extrapolation() const override { return true; }
  void set_extrapolation(const Extrapolation& extrapolation) override;

  // Rotation angles of positions (B'|1, T) -> (B'|1, T, R/2) float32 (computed in float64).
  torch::Tensor angles(const torch::Tensor& positions) const;
  // theta_i of the R/2 pairs under the current extrapolation: (R/2) float64.
  torch::Tensor inverse_frequencies(torch::Device device = torch::kCPU) const;
  // What cos and sin are multiplied by: YaRN's 0.1 ln s + 1, else 1.
  double rotation_magnitude() const;
  // cos and sin of the angles of positions (B'|1, T), times rotation_magnitude():
  // 2 x (B'|1, T, R/2) float32
  std::pair<torch::Tensor, torch::Tensor> rotation_tables(const torch::Tensor& positions) const;
  // x: (B, H, T, Dh) rotated by the angles of positions (B'|1 or B, T) -> (B, H, T, Dh)
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;
  int64_t rotary_dims() const { return rotary_dims_; }
  // The frequencies' spectrum: theta_i = base^(-2i / spectrum_dims) for the R/2 rotated pairs
  // (default R: the whole spectrum over the rotated part; the head's Dh: p-RoPE, the highest
  // frequencies of the full head, the lowest left out), and pairs completing less than one
  // turn over `min_turn_length` positions not rotated at all (HoPE; 0: every pair rotates).
  void set_spectrum(int64_t spectrum_dims, double min_turn_length);

 protected:
  bool supports_rerope_ = false;  // rerope, leaky_rerope: rope only (RopeImpl::score_bias)
  int64_t rotary_dims_, spectrum_dims_;
  double min_turn_length_ = 0;
  bool interleaved_;
  double base_;
  RotaryExtrapolationOptions extrapolation_options_;
  Extrapolation extrapolation_;
};

}  // namespace pelab
