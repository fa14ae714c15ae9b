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

AttentionMask AttentionMask::restricted(const LocalAttention& local) const {
  AttentionMask mask = *this;
  mask.local_ = local;
  mask.additive_ = torch::Tensor();
  return mask;
}

const torch::Tensor& AttentionMask::additive() const {
  if (!causal_ && !local_.any()) return padding_;
  if (additive_.defined()) return additive_;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  const auto index = torch::arange(length_, options.dtype(torch::kInt64));
  const auto query = index.view({-1, 1}), key = index.view({1, -1});
  // hidden: (T, T) bool, true where query i may not see key j
  auto hidden = causal_ ? key > query : torch::zeros({length_, length_}, options.dtype(torch::kBool));
  if (local_.window > 0) hidden = hidden | ((query - key).abs() >= local_.window);
  if (local_.chunk > 0) hidden = hidden | (query.div(local_.chunk, "floor") != key.div(local_.chunk, "floor"));
  const auto table = torch::zeros({length_, length_}, options).masked_fill(hidden, kNegativeInfinity);
  if (local_.any() && padding_.defined()) {
    // a query always sees its own key: padding keys are masked everywhere but on the diagonal
    const auto padding = padding_.expand({padding_.size(0), 1, length_, length_})
                             .masked_fill(torch::eye(length_, options.dtype(torch::kBool)), 0.0f);
    additive_ = padding + table.view({1, 1, length_, length_});
  } else {
    const auto view = table.view({1, 1, length_, length_});
    additive_ = padding_.defined() ? padding_ + view : view;
  }
  return additive_;
}

}  // namespace pelab
