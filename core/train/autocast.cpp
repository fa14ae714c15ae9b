#include "core/train/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace pelab {

namespace {

// LibTorch 2.4 names the device type in one set of functions and deprecates the per-device
// ones (which print a warning at every call); 1.13 has only the per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(bool cuda) { return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU); }
at::ScalarType autocast_dtype(bool cuda) { return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU); }
void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
}
#else
bool autocast_enabled(bool cuda) { return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
at::ScalarType autocast_dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
}
#endif

}  // namespace

AutocastScope::AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  was_enabled_ = autocast_enabled(cuda_);
  previous_dtype_ = autocast_dtype(cuda_);
  set_autocast(cuda_, true, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  // the cast weights are cached while any scope is open; drop them with the outermost one
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_, previous_dtype_);
}

}  // namespace pelab
