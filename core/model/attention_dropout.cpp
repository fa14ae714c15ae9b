#include "core/model/attention_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "core/model/run_generator.h"

#include <mutex>

namespace pelab {

uint64_t draw_attention_dropout_key() {
  auto generator = run_cpu_generator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

torch::Tensor attention_dropout_multipliers(int64_t B, int64_t H, int64_t Tq, int64_t Tk,
                                            const kernels::AttentionDropout& dropout) {
  auto multipliers = torch::empty({B, H, Tq, Tk}, torch::kFloat32);
  float* data = multipliers.data_ptr<float>();
  at::parallel_for(0, B * H * Tq, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const uint32_t seed = kernels::dropout_row_seed(dropout.key, row);
      for (int64_t j = 0; j < Tk; ++j)
        data[row * Tk + j] = dropout.active() && kernels::dropout_hash(seed, static_cast<uint32_t>(j)) < dropout.threshold
                                 ? 0.0f
                                 : dropout.keep_scale;
    }
  });
  return multipliers;
}

}  // namespace pelab
