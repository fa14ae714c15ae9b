// Which keys a query may not attend to: padding keys and, in a causal model, every key
// after the query. Kept as its parts, not only as one additive (B, 1, T, T) tensor, so that
// each attention path takes what it can use: the fused CPU kernel masks the future itself
// and skips the keys no query of a block sees (about half the work at T 512); a GPU's
// scaled_dot_product_attention gets is_causal, and with it its flash kernel, when nothing
// else is masked and there is no bias; the unfused path adds the whole additive mask.
#pragma once

#include <torch/torch.h>

namespace pelab {

// Local attention (model.window, model.chunk), by token index: which keys a query sees
// besides the causal rule. A query always sees its own key, so that no row is masked whole
// (a padding query whose window holds only padding keys attends to itself).
struct LocalAttention {
  int64_t window = 0;  // > 0: keys j with |i - j| < window (with the causal rule: i - window < j <= i)
  int64_t chunk = 0;   // > 0: keys j with floor(j / chunk) = floor(i / chunk)
  bool any() const { return window > 0 || chunk > 0; }
};

class AttentionMask {
 public:
  AttentionMask() = default;  // nothing masked
  // padding: (B, T) bool, true at padding keys (whether any is, is read back from its device).
  AttentionMask(const torch::Tensor& padding, bool causal);
  // No key is padding (the caller knows so on the host): T keys on `device`.
  AttentionMask(int64_t length, bool causal, torch::Device device)
      : causal_(causal), length_(length), device_(device) {}

  // The same mask restricted to `local` keys (nothing more when !local.any()).
  AttentionMask restricted(const LocalAttention& local) const;

  bool causal() const { return causal_; }
  const LocalAttention& local() const { return local_; }
  // Causal and nothing else: a GPU's SDPA may take is_causal instead of a mask.
  bool only_causal() const { return causal_ && !padding_.defined() && !local_.any(); }
  // Additive (B, 1, 1, T): 0, or -inf at padding keys; undefined when no key is padding.
  const torch::Tensor& padding() const { return padding_; }
  // Padding, the causal triangle (key j > query i) and the local restriction as one additive
  // (B|1, 1, T|1, T) tensor of 0 and -inf; undefined when nothing is masked. Built on first use.
  const torch::Tensor& additive() const;
  // What the fused CPU kernel reads beside its causal flag: padding() ((B, 1, 1, T)), or,
  // under local attention, additive().
  const torch::Tensor& kernel_mask() const { return local_.any() ? additive() : padding_; }
  // Whether any key is masked for any query.
  bool any() const { return causal_ || padding_.defined() || local_.any(); }

 private:
  torch::Tensor padding_;
  bool causal_ = false;
  LocalAttention local_;
  int64_t length_ = 0;
  torch::Device device_{torch::kCPU};
  mutable torch::Tensor additive_;  // built by additive() when causal or local
};

}  // namespace pelab
