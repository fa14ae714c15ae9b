// CUDA graphs of the whole training step (train.cuda_graphs; docs/gpu.md). At the tiny
// shapes of length-generalization studies a GPU step is a few hundred small kernels whose
// launches, not their arithmetic, take the time; a graph launches them all at once.
//
// A graph replays the kernels it recorded on the addresses it recorded, so everything that
// changes from step to step must reach it through tensors: the step's inputs are copied into
// static tensors before each replay, and the optimizer's learning rate and bias corrections
// arrive as such an input (AdamStep::step_with). Whatever the host decides from a step's
// values (a shape, a branch) is baked in: the trainer keys graphs by everything of that kind
// it knows (sequence length, batch, padding, the positions' layout and contiguity), and a
// step that would read a value back from the device cannot be captured at all; the trainer
// runs each key once eagerly with such reads made errors (SyncCheck) before capturing it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pelab {

// Whether this build can capture CUDA graphs (a LibTorch with CUDA: PELAB_WITH_CUDA).
bool cuda_graphs_available();

// While alive, an operation that waits for the GPU (reading a value back, a selection whose
// size depends on the data) throws instead (torch.cuda.set_sync_debug_mode("error")). A
// no-op without CUDA, and once shared_process() was called: LibTorch's mode is process-wide,
// so in a process training several runs on their threads (the packed runner) it would turn
// the other runs' own read-backs into errors. There a step that reads back is found when its
// capture fails instead (captures are thread-local: CudaGraphStep).
class SyncCheck {
 public:
  SyncCheck();
  ~SyncCheck();
  SyncCheck(const SyncCheck&) = delete;
  SyncCheck& operator=(const SyncCheck&) = delete;

  // Whether `error` is the one such an operation throws.
  static bool is_sync_error(const std::exception& error);
  // From now on in this process SyncCheck does nothing (several runs share the process).
  static void shared_process();
  static bool active_in_process();

 private:
  int previous_ = 0;
  bool set_ = false;
};

// One side stream of the current CUDA device, made the current stream while a Scope of it
// lives. A graphed run does every step on it, the eager first step of each shape included:
// cuBLAS and the allocator set themselves up for a stream on its first use there, which must
// not happen inside a capture (and the legacy default stream cannot be captured at all).
// Without CUDA it does nothing.
class SideStream {
 public:
  SideStream();
  class Scope {
   public:
    explicit Scope(const SideStream& stream);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<void> guard_;
  };

 private:
  std::shared_ptr<void> stream_;
};

// A step function of static input tensors -> output tensors it leaves on the device.
using GraphBody = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>& inputs)>;

// One captured step: `body` recorded once on the current stream (a SideStream's), replayed
// there with new inputs. The graphs of a run share one memory pool (they never run at the
// same time).
class CudaGraphStep {
 public:
  // Allocates static copies of `inputs` (undefined ones stay undefined; a tensor whose rows
  // are one row expanded stays so, and one tensor given twice stays one), fills them, and
  // captures `body` on them. `pool_owner`: a graph whose pool to share, or nullptr.
  CudaGraphStep(const std::vector<torch::Tensor>& inputs, const GraphBody& body, const CudaGraphStep* pool_owner);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // Copies `inputs` (of the captured shapes) into the static tensors and launches the graph,
  // asynchronously. -> the body's outputs: static tensors, overwritten by the next replay.
  const std::vector<torch::Tensor>& replay(const std::vector<torch::Tensor>& inputs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Static copies of step inputs (CudaGraphStep's): `fill` copies new values in, on the
// current stream. Public for its tests, which run on the CPU too.
class StaticInputs {
 public:
  explicit StaticInputs(const std::vector<torch::Tensor>& inputs);
  void fill(const std::vector<torch::Tensor>& inputs);
  const std::vector<torch::Tensor>& tensors() const { return views_; }

 private:
  std::vector<torch::Tensor> bases_, views_;  // a view is its base, or the base (1, ...) expanded
  std::vector<int64_t> alias_of_;             // index of an earlier input it is the same tensor as, or -1
};

}  // namespace pelab
