// softmax(q k^T * scale + bias + mask + relative terms) v, with attention dropout if asked,
// as one autograd function on the CPU, computed by the fused kernels of core/kernels/attention.h: no (B, H, T, T)
// tensors for the raw scores, the scaled scores, the softmax input or a relative scheme's
// terms, and no per-matrix BLAS calls. The probabilities are kept for the backward (as
// autograd would).
#pragma once

#include <torch/torch.h>

#include "core/encodings/position_encoding.h"
#include "core/kernels/attention_dropout.h"
#include "core/model/attention_mask.h"

namespace pelab {

// q: (B, H, Tq, Dh), k, v: (B, H, Tk, Dh), any strides with unit stride along Dh; bias:
// undefined or (B|1, H|1, Tq, Tk), may require grad; mask: padding keys ((B, 1, 1, Tk)
// additive; under local attention the whole (B|1, 1, T, T) additive mask) and, if causal
// (Tq = Tk), the keys after each query, which the kernels skip where a whole block of
// queries cannot see them; relative: a scheme's relative_rows (core/encodings/relative_rows.h), which need
// Tq = Tk = T and contiguous positions; their tables and offset query may require grad
// (relative.bias is not read: pass it as `bias`). -> (B, H, Tq, Dh), a view whose memory
// is (B, Tq, H, Dh), so that out.transpose(1, 2).reshape({B, Tq, H * Dh}) is free.
// dropout: attention dropout's decisions for this call (core/model/attention_dropout.h),
// forward and backward; inactive (the default): none.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                              const torch::Tensor& bias, const AttentionMask& mask,
                              const RelativeRows& relative = {}, const kernels::AttentionDropout& dropout = {});

// The same with q, k and v as the thirds of one projection's output, qkv (B, T, 3 H Dh),
// split into `heads` heads as (B, H, T, Dh) views: the gradient for qkv is written as one
// tensor (separate views' gradients would be concatenated by the split's backward).
torch::Tensor fused_attention_packed(const torch::Tensor& qkv, int64_t heads, double scale, const torch::Tensor& bias,
                                     const AttentionMask& mask, const RelativeRows& relative = {},
                                     const kernels::AttentionDropout& dropout = {});

// How many times fused_attention's forward has run in this process (the test that the
// path is taken; pelab bench --trace shows it as pelab::fused_attention_forward).
int64_t fused_attention_forward_count();

// Whether fused_attention can take tensors like q: float32 on the CPU.
bool fused_attention_supports(const torch::Tensor& q);

}  // namespace pelab
