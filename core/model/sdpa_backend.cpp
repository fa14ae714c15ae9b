#include "core/model/sdpa_backend.h"

#include <torch/version.h>

#include <mutex>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/Context.h>
#endif

namespace pelab {

SdpaBackend choose_sdpa_backend(const SdpaCall& call) {
  if (!call.cuda) return SdpaBackend::library;
  const bool half = call.dtype == torch::kBFloat16 || call.dtype == torch::kFloat16;
  if (!half && call.dtype != torch::kFloat32) return SdpaBackend::unfused;
  // FlashAttention: 16-bit inputs, head sizes 8..256 in steps of 8, no attn_mask
  if (half && !call.additive_mask && call.head_dim % 8 == 0 && call.head_dim <= 256) return SdpaBackend::flash;
  // memory-efficient attention: loads of 16 bytes per row (8 halves or 4 floats); it pads an
  // unaligned mask itself
  if (call.head_dim > 0 && call.head_dim % (half ? 8 : 4) == 0) return SdpaBackend::efficient;
  return SdpaBackend::unfused;
}

const char* sdpa_backend_name(SdpaBackend backend) {
  switch (backend) {
    case SdpaBackend::library: return "library";
    case SdpaBackend::flash: return "flash";
    case SdpaBackend::efficient: return "efficient";
    case SdpaBackend::unfused: return "unfused";
  }
  return "?";
}

torch::Tensor with_sdpa_backend(SdpaBackend backend, const std::function<torch::Tensor()>& attention) {
  TORCH_CHECK(backend != SdpaBackend::unfused, "with_sdpa_backend: the unfused path is pelab's own, not SDPA's");
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  if (backend == SdpaBackend::library) return attention();
  static std::mutex switches;
  std::lock_guard<std::mutex> lock(switches);
  auto& context = at::globalContext();
  struct Saved {
    bool flash, efficient, math, cudnn;
  } const saved{context.userEnabledFlashSDP(), context.userEnabledMemEfficientSDP(), context.userEnabledMathSDP(),
                context.userEnabledCuDNNSDP()};
  auto set = [&](const Saved& s) {
    context.setSDPUseFlash(s.flash);
    context.setSDPUseMemEfficient(s.efficient);
    context.setSDPUseMath(s.math);
    context.setSDPUseCuDNN(s.cudnn);
  };
  set({backend == SdpaBackend::flash, backend == SdpaBackend::efficient, false, false});
  try {
    auto out = attention();
    set(saved);
    return out;
  } catch (...) {
    set(saved);
    throw;
  }
#else
  // LibTorch before 2.3 has no cuDNN attention to avoid; its own order is flash, efficient, math
  return attention();
#endif
}

}  // namespace pelab
