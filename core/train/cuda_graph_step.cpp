#include "core/train/cuda_graph_step.h"

#include "core/model/run_generator.h"

#include <atomic>
#include <stdexcept>
#include <string>

#ifdef PELAB_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pelab {

bool cuda_graphs_available() {
#ifdef PELAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

namespace {
std::atomic<bool> sync_checks_shared_process{false};
}  // namespace

void SyncCheck::shared_process() { sync_checks_shared_process = true; }
bool SyncCheck::active_in_process() { return !sync_checks_shared_process.load(); }

SyncCheck::SyncCheck() {
#ifdef PELAB_WITH_CUDA
  if (!active_in_process()) return;
  auto& state = c10::cuda::warning_state();
  previous_ = static_cast<int>(state.get_sync_debug_mode());
  state.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  set_ = true;
#endif
}

SyncCheck::~SyncCheck() {
#ifdef PELAB_WITH_CUDA
  if (set_) c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(previous_));
#endif
}

bool SyncCheck::is_sync_error(const std::exception& error) {
  return std::string(error.what()).find("called a synchronizing CUDA operation") != std::string::npos;
}

#ifdef PELAB_WITH_CUDA
SideStream::SideStream() : stream_(std::make_shared<c10::cuda::CUDAStream>(c10::cuda::getStreamFromPool())) {}

SideStream::Scope::Scope(const SideStream& stream)
    : guard_(std::make_shared<c10::cuda::CUDAStreamGuard>(*static_cast<c10::cuda::CUDAStream*>(stream.stream_.get()))) {}

SideStream::Scope::~Scope() {
  // the stream's work done before the default stream (which does not wait for it) goes on
  try {
    static_cast<c10::cuda::CUDAStreamGuard*>(guard_.get())->current_stream().synchronize();
  } catch (...) {  // an error the run already reports
  }
}
#else
SideStream::SideStream() = default;

SideStream::Scope::Scope(const SideStream&) {}

SideStream::Scope::~Scope() = default;
#endif

namespace {

bool expanded_rows(const torch::Tensor& t) { return t.dim() > 0 && t.size(0) > 1 && t.stride(0) == 0; }

}  // namespace

StaticInputs::StaticInputs(const std::vector<torch::Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& t = inputs[i];
    int64_t alias = -1;
    for (size_t j = 0; j < i && t.defined(); ++j)
      if (inputs[j].defined() && inputs[j].is_same(t)) alias = static_cast<int64_t>(j);
    alias_of_.push_back(alias);
    if (alias >= 0) {
      bases_.push_back(torch::Tensor());
      views_.push_back(views_[alias]);
    } else if (!t.defined()) {
      bases_.emplace_back();
      views_.emplace_back();
    } else if (expanded_rows(t)) {  // one row shared by the batch (positions): keep it one row
      bases_.push_back(torch::empty_like(t.narrow(0, 0, 1), torch::MemoryFormat::Contiguous));
      views_.push_back(bases_.back().expand(t.sizes()));
    } else {
      bases_.push_back(torch::empty_like(t, torch::MemoryFormat::Contiguous));
      views_.push_back(bases_.back());
    }
  }
  fill(inputs);
}

void StaticInputs::fill(const std::vector<torch::Tensor>& inputs) {
  TORCH_CHECK(inputs.size() == views_.size(), "static inputs: ", views_.size(), " tensors expected, got ",
              inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& t = inputs[i];
    TORCH_CHECK(t.defined() == views_[i].defined() && (!t.defined() || t.sizes() == views_[i].sizes()),
                "static inputs: input ", i, " differs in shape from the captured one");
    if (alias_of_[i] >= 0 || !t.defined()) continue;
    if (bases_[i].sizes() != t.sizes()) bases_[i].copy_(t.narrow(0, 0, 1));  // expanded rows
    else bases_[i].copy_(t);
  }
}

#ifdef PELAB_WITH_CUDA
namespace {
// A capture that fails inside its body (an operation no capture can hold, such as a read-back)
// never reaches LibTorch's capture epilogue. LibTorch 2.x before 2.13 keeps one capture flag
// per generator state, so the default CUDA generator then stays marked as capturing and every
// later draw or replay in the process fails ("Offset increment outside graph capture encountered
// unexpectedly": every packed Ruoss run with dropout on an H200, 2026-11-27). A capture that
// ends clears the flag: one of a single draw, thrown away. (Later LibTorch keeps a state per
// capture, and this is only one more small capture.) The caller holds cuda_generator_exclusive.
void end_generator_capture() {
  auto scratch = torch::empty({1}, torch::TensorOptions().device(torch::kCUDA, c10::cuda::current_device()));
  at::cuda::CUDAGraph graph;
  graph.capture_begin(c10::cuda::MempoolId_t{0, 0}, cudaStreamCaptureModeThreadLocal);
  scratch.uniform_();  // a draw: a LibTorch that registers generators on their first draw in a capture does so
  graph.capture_end();
}
}  // namespace
#endif

struct CudaGraphStep::Impl {
  explicit Impl(const std::vector<torch::Tensor>& inputs) : inputs(inputs) {}
  StaticInputs inputs;
  std::vector<torch::Tensor> outputs;
#ifdef PELAB_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
};

CudaGraphStep::CudaGraphStep(const std::vector<torch::Tensor>& inputs, const GraphBody& body,
                             const CudaGraphStep* pool_owner) {
#ifdef PELAB_WITH_CUDA
  TORCH_CHECK(at::cuda::getCurrentCUDAStream() != at::cuda::getDefaultCUDAStream(),
              "CUDA graphs are captured on a side stream (SideStream), not the default one");
  impl_ = std::make_unique<Impl>(inputs);
  // the capture registers with the default CUDA generator: no other run draws from it meanwhile
  auto capturing = cuda_generator_exclusive();
  // thread-local: another run's thread of a packed process may allocate or read back meanwhile
  impl_->graph.capture_begin(pool_owner ? pool_owner->impl_->graph.pool() : c10::cuda::MempoolId_t{0, 0},
                             cudaStreamCaptureModeThreadLocal);
  bool end_tried = false;
  try {
    impl_->outputs = body(impl_->inputs.tensors());
    end_tried = true;
    impl_->graph.capture_end();
  } catch (...) {
    try {
      if (!end_tried) impl_->graph.capture_end();
    } catch (...) {
    }
    impl_.reset();  // the failed graph leaves the generator while the lock is held
    try {
      end_generator_capture();
    } catch (...) {  // the capture's own error is the one to report
    }
    throw;
  }
#else
  (void)inputs, (void)body, (void)pool_owner;
  throw std::runtime_error("CUDA graphs need a LibTorch with CUDA (docs/gpu.md)");
#endif
}

CudaGraphStep::~CudaGraphStep() {
  auto unregistering = cuda_generator_exclusive();  // the graph leaves the default CUDA generator
  impl_.reset();
}

const std::vector<torch::Tensor>& CudaGraphStep::replay(const std::vector<torch::Tensor>& inputs) {
  impl_->inputs.fill(inputs);
#ifdef PELAB_WITH_CUDA
  auto advancing = cuda_generator_shared();  // the replay moves the default CUDA generator on
  impl_->graph.replay();
#endif
  return impl_->outputs;
}

}  // namespace pelab
