// The CPU random stream of one run. Several runs may train in one process, each on its own
// host thread (the packed runner, `pelab sweep --runs-per-process`), so nothing a run draws
// during training may come from LibTorch's process-wide default generator, whose draws the
// runs would interleave. A RunGeneratorScope gives the thread its own generator; what draws
// (attention dropout keys, dropout masks on the CPU, checkpoints of the stream) asks
// run_cpu_generator(). Initialization draws from the default generator, seeded and used under
// one lock (initialize_with_seed), and the run's generator then continues from the state it
// left: the stream is the same as a run alone in its process would draw.
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <shared_mutex>

namespace pelab {

// The thread's run generator while a RunGeneratorScope lives on it, else the default CPU one.
at::Generator run_cpu_generator();

class RunGeneratorScope {
 public:
  RunGeneratorScope();
  ~RunGeneratorScope();
  RunGeneratorScope(const RunGeneratorScope&) = delete;
  RunGeneratorScope& operator=(const RunGeneratorScope&) = delete;

 private:
  at::Generator generator_;
  at::Generator* outer_;
};

// The device's default CUDA generator is one for the whole process: every packed run's dropout
// kernels draw from it and every CUDA graph registers with it. LibTorch 2.x (before 2.13) marks
// it as capturing during a capture, and a draw or replay on another thread then fails ("Offset
// increment outside graph capture encountered unexpectedly": 16 packed Ruoss runs with dropout
// on an H200, 2026-11-27); graphs registering and unregistering on several threads race. So
// captures, graph destructions and changes of its state hold this lock alone; eager GPU steps
// and replays hold it shared (among themselves they only advance its offset). A waiting
// exclusive holder goes before new shared ones: runs whose steps are all eager cannot keep a
// capture waiting. Not recursive. Without CUDA: an uncontended lock.
class CudaGeneratorMutex {
 public:
  void lock();
  void unlock();
  void lock_shared();
  bool try_lock_shared();
  void unlock_shared();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t shared_holders_ = 0, exclusive_waiting_ = 0;
  bool exclusive_held_ = false;
};
std::shared_lock<CudaGeneratorMutex> cuda_generator_shared();
std::unique_lock<CudaGeneratorMutex> cuda_generator_exclusive();

// Seeds LibTorch's default generators with `seed` and runs `initialize` (which draws from
// them: parameter initialization) while holding a process-wide lock; the thread's run
// generator, if any, then takes the default CPU generator's state.
void initialize_with_seed(uint64_t seed, const std::function<void()>& initialize);

// Dropout with probability p on a CPU tensor drawing from run_cpu_generator(), equal bit for
// bit to torch::dropout drawing from the default generator in the same state; other devices
// (whose dropout kernels take the device's default generator) go to torch::dropout.
// x: any shape -> the same shape.
torch::Tensor run_dropout(const torch::Tensor& x, double p, bool training);

}  // namespace pelab
