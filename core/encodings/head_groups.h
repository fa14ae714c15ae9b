// Schemes by head (encoding_heads): the heads of a block split into consecutive groups, each
// with its own scheme. NAPE (Vasylenko, Treviso & Martins 2025) gives half the heads ALiBi and
// half none; Hard-ALiBi (Jelassi et al. 2024) gives some heads hard windows (`hard_alibi`)
// and the rest none. Each group's scheme is built for its own heads (EncodingContext
// num_heads = the group's, model_heads = the block's), sees q and k of its heads only and a
// layer context whose qkv_weight holds its heads' rows; the hooks' results are put back
// together along the heads. A scheme that adds to the residual stream (sinusoidal, learned,
// ...) has no heads to act on and is refused. Not registered: the encoder builds it.
#pragma once

#include "core/encodings/position_encoding.h"

namespace pelab {

class HeadGroupsImpl : public PositionEncodingImpl {
 public:
  // groups: one scheme per group, in head order, each built with context().num_heads heads
  // (summing to context.num_heads) and the same attention scale
  HeadGroupsImpl(const EncodingContext& context, std::vector<PositionEncoding> groups);

  void check_positions(const Positions& positions) const override;
  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override;
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;
  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override;
  torch::Tensor value_term(const torch::Tensor& probs, const AttentionContext& attention) override;
  bool has_value_term() const override;
  bool has_value_term_at(int64_t layer) const override;
  bool replaces_softmax() const override;
  bool replaces_softmax_at(int64_t layer) const override;
  torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                  const AttentionContext& attention) override;
  double attention_scale() const override { return groups_.front()->attention_scale(); }
  bool supports_extrapolation() const override;
  void set_extrapolation(const Extrapolation& extrapolation) override;
  bool shift_invariant() const override;
  std::vector<PositionTable> position_tables() const override;

  int64_t group_count() const { return static_cast<int64_t>(groups_.size()); }
  PositionEncodingImpl& group(int64_t g) { return *groups_.at(g); }

 private:
  // t: (B|1, H, ...) -> the group's heads, (B|1, heads of g, ...)
  torch::Tensor heads_of(const torch::Tensor& t, int64_t g) const { return t.narrow(1, first_head_[g], heads_[g]); }
  // Whether `holds` is true of some group's scheme.
  template <typename Predicate>
  bool any_group(Predicate holds) const {
    for (const auto& scheme : groups_)
      if (holds(*scheme)) return true;
    return false;
  }
  // q or k as rotate returned them, (B, H, T, width) -> group g's heads at the width its own
  // rotate gave (rotate pads the narrower groups with zeros)
  torch::Tensor rotated_heads(const torch::Tensor& t, int64_t g) const {
    const auto heads = heads_of(t, g);
    return g < static_cast<int64_t>(rotated_width_.size()) && rotated_width_[g] < t.size(-1)
               ? heads.narrow(-1, 0, rotated_width_[g])
               : heads;
  }
  // The layer context for group g: its heads' rows of qkv_weight and qkv_bias (held in `rows`).
  AttentionContext group_context(const AttentionContext& attention, int64_t g,
                                 std::pair<torch::Tensor, torch::Tensor>& rows) const;
  // Per group a (B|1, heads of g, Tq, Tk) tensor or undefined -> (B', H, Tq, Tk) with zeros for
  // the undefined ones (B' the largest batch); undefined when every part is.
  torch::Tensor join_heads(const std::vector<torch::Tensor>& parts, const std::vector<int64_t>& tail_shape,
                           const torch::TensorOptions& options) const;

  std::vector<PositionEncoding> groups_;
  std::vector<int64_t> heads_, first_head_;
  std::vector<int64_t> rotated_width_;  // per group, the width of q and k its last rotate gave
};

}  // namespace pelab
