// Tensors as the torch-free CPU kernels' strided views (core/kernels/attention.h: Strided,
// MutableStrided), for the autograd functions that call them: the fused attention
// (core/model/fused_attention.cpp) and the schemes with kernels of their own (stick_breaking,
// cope, path).
#pragma once

#include <torch/torch.h>

#include "core/kernels/attention.h"

namespace pelab {

// t, or a contiguous copy when its last dimension is not of unit stride.
inline torch::Tensor unit_last_stride(const torch::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

// A float32 (B, H, R, C) tensor with unit stride along C (a dimension of size 1 broadcasts:
// stride 0), or (B, H, T) with row stride 1; an undefined or empty tensor is the absent view
// (null data).
inline kernels::Strided kernel_view(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  TORCH_CHECK((t.dim() == 4 || t.dim() == 3) && t.stride(-1) == 1,
              "kernel view: expected a 3-D or 4-D tensor with unit last stride, got ", t.sizes(), " strides ",
              t.strides());
  auto stride = [&](int64_t d) { return t.size(d) == 1 ? 0 : t.stride(d); };
  return {t.data_ptr<float>(), stride(0), stride(1), t.dim() == 4 ? stride(2) : 1};
}

// A float32 (B, H, R, C) or (B, H, T) tensor to write.
inline kernels::MutableStrided mutable_kernel_view(const torch::Tensor& t) {
  return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.dim() == 4 ? t.stride(2) : 1};
}

}  // namespace pelab
