// `precision: bf16`: LibTorch's autocast while a scope is alive. Matrix products (linear
// layers, attention) run in bfloat16; softmax, layer norm, reductions and the loss stay in
// float32 (autocast's own op lists); parameters, gradients and the optimizer state stay
// float32. On the CPU the fused attention kernel is float32 only, so bf16 runs there take
// the unfused path (bf16 on the CPU is for checking a config, not for speed).
#pragma once

#include <torch/torch.h>

namespace pelab {

class AutocastScope {
 public:
  // Enables bf16 autocast on `device`'s type when `enabled`; does nothing otherwise.
  AutocastScope(bool enabled, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_ = false, cuda_ = false, was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace pelab
