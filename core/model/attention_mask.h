// Which keys a query may not attend to: padding keys and, in a causal model, every key
// after the query. Kept as its parts, not only as one additive (B, 1, T, T) tensor, so that
// each attention path takes what it can use: the fused CPU kernel masks the future itself
// and skips the keys no query of a block sees (about half the work at T 512); a GPU's
// scaled_dot_product_attention gets is_causal, and with it its flash kernel, when nothing
// else is masked and there is no bias; the unfused path adds the whole additive mask.
#pragma once

#include <torch/torch.h>

namespace pelab {

class AttentionMask {
 public:
  AttentionMask() = default;  // nothing masked
  // padding: (B, T) bool, true at padding keys (whether any is, is read back from its device).
  AttentionMask(const torch::Tensor& padding, bool causal);
  // No key is padding (the caller knows so on the host): T keys on `device`.
  AttentionMask(int64_t length, bool causal, torch::Device device)
      : causal_(causal), length_(length), device_(device) {}

  bool causal() const { return causal_; }
  // Additive (B, 1, 1, T): 0, or -inf at padding keys; undefined when no key is padding.
  const torch::Tensor& padding() const { return padding_; }
  // Padding and the causal triangle (key j > query i) as one additive (B|1, 1, T|1, T)
  // tensor of 0 and -inf; undefined when nothing is masked. Built on first use.
  const torch::Tensor& additive() const;
  // Whether any key is masked for any query.
  bool any() const { return causal_ || padding_.defined(); }

 private:
  torch::Tensor padding_;
  bool causal_ = false;
  int64_t length_ = 0;
  torch::Device device_{torch::kCPU};
  mutable torch::Tensor additive_;  // built by additive() when causal
};

}  // namespace pelab
