#include "core/model/run_generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace pelab {

namespace {
thread_local at::Generator* thread_generator = nullptr;
std::mutex initialization;
CudaGeneratorMutex cuda_generator;
}  // namespace

void CudaGeneratorMutex::lock() {
  std::unique_lock<std::mutex> lock(mutex_);
  ++exclusive_waiting_;
  changed_.wait(lock, [&] { return !exclusive_held_ && shared_holders_ == 0; });
  --exclusive_waiting_;
  exclusive_held_ = true;
}

void CudaGeneratorMutex::unlock() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exclusive_held_ = false;
  }
  changed_.notify_all();
}

void CudaGeneratorMutex::lock_shared() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !exclusive_held_ && exclusive_waiting_ == 0; });
  ++shared_holders_;
}

bool CudaGeneratorMutex::try_lock_shared() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (exclusive_held_ || exclusive_waiting_ > 0) return false;
  ++shared_holders_;
  return true;
}

void CudaGeneratorMutex::unlock_shared() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = --shared_holders_ == 0;
  }
  if (last) changed_.notify_all();
}

std::shared_lock<CudaGeneratorMutex> cuda_generator_shared() { return std::shared_lock<CudaGeneratorMutex>(cuda_generator); }
std::unique_lock<CudaGeneratorMutex> cuda_generator_exclusive() { return std::unique_lock<CudaGeneratorMutex>(cuda_generator); }

at::Generator run_cpu_generator() {
  return thread_generator ? *thread_generator : at::detail::getDefaultCPUGenerator();
}

RunGeneratorScope::RunGeneratorScope() : generator_(at::detail::createCPUGenerator()), outer_(thread_generator) {
  // until initialize_with_seed: the default generator's current state
  generator_.set_state(at::detail::getDefaultCPUGenerator().get_state());
  thread_generator = &generator_;
}

RunGeneratorScope::~RunGeneratorScope() { thread_generator = outer_; }

void initialize_with_seed(uint64_t seed, const std::function<void()>& initialize) {
  std::lock_guard<std::mutex> lock(initialization);
  auto seeding = cuda_generator_exclusive();  // manual_seed also seeds the CUDA generators
  torch::manual_seed(seed);
  initialize();
  if (thread_generator) {
    auto default_generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> generator_lock(default_generator.mutex());
    thread_generator->set_state(default_generator.get_state());
  }
}

torch::Tensor run_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  if (!x.device().is_cpu()) return torch::dropout(x, p, training);
  // ATen's CPU dropout: noise = bernoulli(1 - p) / (1 - p), x * noise
  // (bernoulli_ locks the generator itself)
  auto noise = at::empty_like(x, at::MemoryFormat::Contiguous).bernoulli_(1 - p, run_cpu_generator());
  noise.div_(1 - p);
  return x * noise;
}

}  // namespace pelab
