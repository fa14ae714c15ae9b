// The rule that picks a GPU's attention kernel (core/model/sdpa_backend.h): a pure function
// of what the host knows, so it is tested here on the CPU; docs/gpu.md states it.
#include "tests/catch.h"

#include "core/model/sdpa_backend.h"
#include "tests/support.h"

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/Context.h>
#endif

using namespace pelab;

CATCH_TEST_CASE("the SDPA backend rule: flash without a mask in bf16, efficient with one, never cuDNN",
                "[sdpa]") {
  struct Case {
    SdpaCall call;
    SdpaBackend expected;
  };
  const std::vector<Case> cases = {
      // the CPU: LibTorch's own choice (tests take SDPA there only through use_sdpa_on_cpu)
      {{false, torch::kBFloat16, true, 64}, SdpaBackend::library},
      {{false, torch::kFloat32, false, 8}, SdpaBackend::library},
      // bf16 without an additive mask (no bias, no padding; is_causal is not a mask): flash
      {{true, torch::kBFloat16, false, 64}, SdpaBackend::flash},
      {{true, torch::kBFloat16, false, 256}, SdpaBackend::flash},
      {{true, torch::kFloat16, false, 8}, SdpaBackend::flash},
      // the failing case of the H200: a bf16 bias (relative_key at evaluation) goes to the
      // memory-efficient kernel, not cuDNN's
      {{true, torch::kBFloat16, true, 16}, SdpaBackend::efficient},
      {{true, torch::kBFloat16, true, 64}, SdpaBackend::efficient},
      // flash stops at head size 256; the efficient kernel goes on
      {{true, torch::kBFloat16, false, 512}, SdpaBackend::efficient},
      // float32: never flash; efficient with or without a mask
      {{true, torch::kFloat32, false, 64}, SdpaBackend::efficient},
      {{true, torch::kFloat32, true, 12}, SdpaBackend::efficient},
      // head sizes the kernels do not load in 16-byte rows: pelab's unfused path
      {{true, torch::kBFloat16, false, 12}, SdpaBackend::unfused},
      {{true, torch::kBFloat16, true, 6}, SdpaBackend::unfused},
      {{true, torch::kFloat32, true, 6}, SdpaBackend::unfused},
      {{true, torch::kFloat64, false, 64}, SdpaBackend::unfused},
  };
  for (const auto& c : cases) {
    CATCH_CAPTURE(c.call.cuda, c.call.dtype, c.call.additive_mask, c.call.head_dim);
    CATCH_CHECK(sdpa_backend_name(choose_sdpa_backend(c.call)) == std::string(sdpa_backend_name(c.expected)));
  }
}

CATCH_TEST_CASE("with_sdpa_backend enables only the chosen kernel during the call, then restores", "[sdpa]") {
  CATCH_CHECK_THROWS_WITH(with_sdpa_backend(SdpaBackend::unfused, [] { return torch::Tensor(); }),
                          test::ContainsText("the unfused path is pelab's own"));
  int calls = 0;
  auto during = [&](bool flash, bool efficient) {
    return [&, flash, efficient] {
      ++calls;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
      auto& context = at::globalContext();
      CATCH_CHECK(context.userEnabledFlashSDP() == flash);
      CATCH_CHECK(context.userEnabledMemEfficientSDP() == efficient);
      CATCH_CHECK_FALSE(context.userEnabledMathSDP());
      CATCH_CHECK_FALSE(context.userEnabledCuDNNSDP());
#else
      (void)flash, (void)efficient;
#endif
      return torch::ones({1});
    };
  };
  CATCH_CHECK(with_sdpa_backend(SdpaBackend::flash, during(true, false)).item<float>() == 1.0f);
  CATCH_CHECK(with_sdpa_backend(SdpaBackend::efficient, during(false, true)).item<float>() == 1.0f);
  CATCH_CHECK(calls == 2);
  // an exception inside restores the switches too
  CATCH_CHECK_THROWS_WITH(with_sdpa_backend(SdpaBackend::efficient, []() -> torch::Tensor { throw std::runtime_error("inside"); }),
                          test::ContainsText("inside"));
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  auto& context = at::globalContext();
  CATCH_CHECK(context.userEnabledMathSDP());
  CATCH_CHECK(context.userEnabledFlashSDP());
  CATCH_CHECK(context.userEnabledMemEfficientSDP());
#endif
}
