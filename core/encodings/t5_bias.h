// `t5_bias`: T5's relative attention bias (Raffel et al. 2020;
// huggingface/transformers src/transformers/models/t5/modeling_t5.py,
// T5Attention._relative_position_bucket and compute_bias). Sign: relative_position =
// key - query (memory_position - context_position). Bidirectional buckets use half the
// buckets per direction; causal buckets send future keys to bucket 0. One (num_buckets, H)
// table of scalar biases is shared by all layers (HF: created in layer 0 and passed on).
// T5 does not scale scores by 1/sqrt(Dh): `scale: none` reproduces that; the default
// keeps pelab's shared 1/sqrt(Dh) so that T5 is compared under the same initialisation.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

// Bucket of each key - query offset (any shape, int64) -> same shape, int64 in [0, num_buckets).
torch::Tensor t5_relative_bucket(const torch::Tensor& key_minus_query, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance);

// Refuses a max_distance within the exact buckets; `scheme` names the scheme in the message.
void check_t5_max_distance(const std::string& scheme, bool causal, int64_t num_buckets, int64_t max_distance);

// table (num_buckets, H) looked up by the bucket of every (query, key) pair of `positions`
// -> (B'|1, H, Tq, Tk). clamp_distance > 0: offsets beyond +-clamp_distance read the bucket of
// +-clamp_distance (eval.extrapolation clamp).
torch::Tensor t5_bucket_bias(const torch::Tensor& table, const Positions& positions, bool causal,
                             int64_t num_buckets, int64_t max_distance, int64_t clamp_distance = 0);

class T5BiasImpl : public PositionEncodingImpl {
 public:
  T5BiasImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  double attention_scale() const override;
  // eval.extrapolation none or clamp: distances beyond the longest training sequence's (L - 1
  // tokens) read its bucket, so that no bucket training never reached is read
  bool supports_extrapolation() const override { return true; }
  void set_extrapolation(const Extrapolation& extrapolation) override;
  std::vector<PositionTable> position_tables() const override { return {{"relative_attention_bias", "bucket", 0}}; }

 private:
  int64_t num_buckets_, max_distance_;
  bool scaled_;
  int64_t clamp_distance_ = 0;  // 0: no clamping
  torch::Tensor table_;  // (num_buckets, H)
};

}  // namespace pelab
