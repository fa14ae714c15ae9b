// A host tensor copied to the training device without waiting for it: to a GPU through
// pinned memory with non_blocking, so that making a batch (data/) or its positions (the
// samplers) does not stop the host until the GPU has finished the steps queued before it
// (train.sync_every). On the CPU a plain .to().
#pragma once

#include <torch/torch.h>

namespace pelab {

inline torch::Tensor host_to_device(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda() || !host.device().is_cpu()) return host.to(device);
  // the caching host allocator keeps the pinned block until the copy has run
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace pelab
