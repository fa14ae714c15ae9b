// Which kernel of scaled_dot_product_attention (SDPA) runs a GPU's attention: pelab chooses it
// itself, by a pure rule, instead of leaving it to LibTorch's own order (docs/gpu.md, "Which
// attention kernel"). LibTorch 2.5 and later put cuDNN's fused attention first on H100/H200
// (compute capability 9.0, cuDNN newer than 9.15), and cuDNN refuses some additive masks at
// run time (`mha_graph.execute(...).is_good()` false: a bf16 relative_key bias at evaluation,
// batch 128 x length 40, on an H200 with LibTorch 2.11; PyTorch issues 122695, 134001,
// 190321). pelab therefore never lets cuDNN run attention.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace pelab {

enum class SdpaBackend {
  library,    // LibTorch's own choice (the CPU, in tests: use_sdpa_on_cpu)
  flash,      // FlashAttention: bf16/fp16, no additive mask (is_causal allowed)
  efficient,  // memory-efficient attention (xFormers): any dtype, any additive mask
  unfused,    // pelab's own scores + softmax + p v (no SDPA kernel fits)
};

// What the rule looks at, all known on the host before the call.
struct SdpaCall {
  bool cuda = false;                          // q is on a CUDA device
  torch::ScalarType dtype = torch::kFloat32;  // q's (and the mask's, cast to it)
  bool additive_mask = false;                 // an attn_mask is passed (a bias, masked keys, or both)
  int64_t head_dim = 0;                       // Dh
};

// The backend for `call`:
//  - not CUDA: library;
//  - bf16/fp16, no additive mask, Dh a multiple of 8 and at most 256: flash;
//  - Dh a multiple of 8 (bf16/fp16) or of 4 (fp32): efficient (it takes every mask shape);
//  - otherwise: unfused.
SdpaBackend choose_sdpa_backend(const SdpaCall& call);
const char* sdpa_backend_name(SdpaBackend backend);

// Runs `attention` (one at::scaled_dot_product_attention call) with only `backend`'s kernel
// enabled in LibTorch's SDPA switches (flash or efficient; cuDNN and math off), restoring the
// switches afterwards. The switches are process-wide, so calls are serialized by a lock held
// for the launch only (runs on several host threads share it). library runs it as is.
torch::Tensor with_sdpa_backend(SdpaBackend backend, const std::function<torch::Tensor()>& attention);

}  // namespace pelab
