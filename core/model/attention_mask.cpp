#include "core/model/attention_mask.h"

#include <limits>

namespace pelab {

namespace {
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();
}  // namespace

AttentionMask::AttentionMask(const torch::Tensor& padding, bool causal)
    : causal_(causal), device_(padding.device()) {
  TORCH_CHECK(padding.dim() == 2 && padding.scalar_type() == torch::kBool,
              "attention mask: padding must be (B, T) bool, got ", padding.sizes(), " ", padding.dtype());
  length_ = padding.size(1);
  if (padding.any().item<bool>())  // one host sync per forward pass (not per layer)
    padding_ = torch::zeros(padding.sizes(), torch::TensorOptions().dtype(torch::kFloat32).device(device_))
                   .masked_fill(padding, kNegativeInfinity)
                   .view({-1, 1, 1, length_});
}

const torch::Tensor& AttentionMask::additive() const {
  if (!causal_) return padding_;
  if (additive_.defined()) return additive_;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  const auto future = torch::ones({length_, length_}, options.dtype(torch::kBool)).triu(1);  // key j > query i
  const auto triangle =
      torch::zeros({length_, length_}, options).masked_fill(future, kNegativeInfinity).view({1, 1, length_, length_});
  additive_ = padding_.defined() ? padding_ + triangle : triangle;
  return additive_;
}

}  // namespace pelab
