// `hard_alibi`: Jelassi, Brandfonbrener, Kakade & Malach 2024, "Repeat After Me"
// (sjelassi/transformers_ssm_copy, synthetic_exps/models/hard_alibi_model.py): a hard local
// window per head instead of ALiBi's linear slope. Head h (0-based among this scheme's heads)
// sees the keys whose offset query - key is below first_window + h (the reference: 1 + h, so
// head 0 sees only its own token); farther keys get a bias of -1e9 (the reference adds
// finfo.min; a finite value keeps a padding query whose window holds only padding finite).
// Bidirectional: |query - key| < first_window + h. The paper's model is this on some heads
// and NoPE on the rest: encoding_heads [{num_heads: m, name: hard_alibi}, {num_heads: H - m, name: none}]
// (configs/hybrids/hard_alibi.yaml). Offsets are by token index, as model.window's (the
// reference's positions are its indices): positions are not read, and a position sampler's
// gaps do not close the windows.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class HardAlibiImpl : public PositionEncodingImpl {
 public:
  HardAlibiImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // The bias of a key outside a head's window.
  static constexpr double kOutside = -1e9;

 private:
  int64_t first_window_;
};

}  // namespace pelab
