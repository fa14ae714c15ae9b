// `dynamic_position_bias`: x-transformers' dynamic position bias (lucidrains/x-transformers,
// DynamicPositionBias; after Wang et al. 2021's CrossFormer). A small MLP maps each offset
// d = query - key (or, with log_distance, sign(d) log(|d| + 1)) to one bias per head:
//   b_h(i, j) = f_h(d),  f = Linear(1, W) -> SiLU -> [Linear(W, W) -> SiLU] x (depth - 1) -> Linear(W, H)
// one MLP shared by every block, as x-transformers shares one across its layers. The MLP runs
// once per distinct offset (at most 2T - 1), not per pair. Its parameters are named as the
// Python tutorial scheme's (examples/schemes/dynamic_position_bias.py: mlp.0, mlp.2, ...), and
// tests/peers compare both with x-transformers' own module. Departure: x-transformers' option
// of a LayerNorm after each hidden Linear (norm=True) is not offered.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class DynamicPositionBiasImpl : public PositionEncodingImpl {
 public:
  DynamicPositionBiasImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B'|1, H, Tq, Tk)
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  // The MLP of offsets d of any shape -> (..., H)
  torch::Tensor bias_of_offsets(const torch::Tensor& offsets);

 private:
  bool log_distance_;
  torch::nn::Sequential mlp_{nullptr};
};

}  // namespace pelab
