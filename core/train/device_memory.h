// Peak GPU memory of a process, from LibTorch's CUDA caching allocator (builds against a
// CUDA LibTorch define PELAB_WITH_CUDA; elsewhere these say there is no such memory).
#pragma once

#include <cstdint>

namespace pelab {

// Starts a new peak on CUDA device `index`: the peak becomes what is allocated now.
void reset_cuda_peak_memory(int64_t index);
// Memory allocated on CUDA device `index`, in MiB, now and at the peak since the last reset (0, 0
// without CUDA).
struct CudaMemory {
  double allocated_mb = 0, peak_mb = 0;
};
CudaMemory cuda_memory(int64_t index);

}  // namespace pelab
