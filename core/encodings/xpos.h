// `xpos`: Sun et al. 2022, "A Length-Extrapolatable Transformer" (microsoft/torchscale
// torchscale/component/xpos_relative_position.py, XPOS). RoPE (interleaved pairs) times an
// exponential decay per pair: with zeta_i = (2i + 0.4 Dh) / (1.4 Dh) and centred positions
// n = p - ceil(L / 2) (L = largest key position + 1),
//   q' = zeta^(n / scale_base) * rope(q),   k' = zeta^(-n / scale_base) * rope(k)
// so q'.k' scales by zeta^((i - j) / scale_base): it decays with distance for keys in the
// past, and grows for keys in the future, hence causal only (a bidirectional model is
// refused, by the config loader with file:line:col). scale_base 512. No parameters.
#pragma once

#include "core/encodings/rotary.h"

namespace pelab {

class XposImpl : public RotaryImpl {
 public:
  XposImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
  static bool causal_only() { return true; }

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  // zeta^(n / scale_base) of centred positions n (B'|1, T) -> (B'|1, T, Dh/2)
  torch::Tensor scale(const torch::Tensor& centred) const;

 private:
  double scale_base_;
};

}  // namespace pelab
