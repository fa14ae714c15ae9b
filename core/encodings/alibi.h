// `alibi`: Press, Smith & Lewis 2022, "Train Short, Test Long"
// (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py get_slopes).
// A fixed per-head slope m_h, geometric from 2^(-8/H); for a head count that is not a power
// of two, the slopes of the closest smaller power of two followed by every other slope of
// twice that. Added to the scaled scores, no parameters. Distance |query - key|:
//   variant standard:  bias = -m_h |i - j|    (causal ALiBi in causal mode, symmetric
//                                               bidirectional ALiBi otherwise)
//   variant deepmind:  bias = m_h (-|i - j| + 0.5 [j < i])   (google-deepmind/
//                      randomized_positional_encodings models/positional_encodings.py,
//                      compute_alibi_encodings_biases: keys left of the query get +0.5 m)
// As lucidrains/x-transformers: `heads` gives the bias to the first n heads only, with the
// slopes of n heads (alibi_num_heads; the other heads get none), and `learned_slopes` makes
// the slopes parameters, learned as their logarithms from Press's values
// (LearnedAlibiPositionalBias).
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

// Press et al.'s slopes for `heads` heads: (heads) float32.
torch::Tensor alibi_slopes(int64_t heads);

class AlibiImpl : public PositionEncodingImpl {
 public:
  AlibiImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

 private:
  bool deepmind_;
  int64_t biased_heads_;     // the first heads get a bias, the others none
  torch::Tensor log_slopes_;  // (biased_heads) with learned_slopes, else undefined
  // Press's slopes (biased_heads), float32 on `device`, copied there once (without waiting
  // for the device) and kept: a CUDA graph cannot hold a copy from the host
  const torch::Tensor& fixed_slopes(torch::Device device);
  torch::Tensor fixed_slopes_;
};

}  // namespace pelab
