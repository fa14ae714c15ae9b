#include "core/train/device_memory.h"

#ifdef PELAB_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace pelab {

#ifdef PELAB_WITH_CUDA
namespace {
constexpr size_t kAllPools = 0;  // StatType::AGGREGATE: small and large pools together
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

void reset_cuda_peak_memory(int64_t index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
}

CudaMemory cuda_memory(int64_t index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  return {double(stats.allocated_bytes[kAllPools].current) / kMiB, double(stats.allocated_bytes[kAllPools].peak) / kMiB};
}
#else
void reset_cuda_peak_memory(int64_t) {}
CudaMemory cuda_memory(int64_t) { return {}; }
#endif

}  // namespace pelab
