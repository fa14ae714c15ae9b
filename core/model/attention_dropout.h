// Attention dropout on the CPU (core/kernels/attention_dropout.h): one key per attention call,
// drawn from the run's generator, decides every dropped probability, for the fused kernel
// (core/model/fused_attention.h) and for the unfused path alike; so the two paths drop the
// same probabilities, a run is reproducible, and a resumed run, whose generator state comes
// from its checkpoint, draws the same keys.
#pragma once

#include <torch/torch.h>

#include "core/kernels/attention_dropout.h"

namespace pelab {

// A key drawn from the run's CPU generator (run_cpu_generator: the thread's run generator, or
// LibTorch's default one; the trainer checkpoints it), under its lock.
uint64_t draw_attention_dropout_key();

// The multipliers the decisions of `dropout` give a call's (B, H, Tq, Tk) probabilities: 1 / (1
// - p) where kept, 0 where dropped (row (b * H + h) * Tq + i, column j), float32 on the CPU.
torch::Tensor attention_dropout_multipliers(int64_t B, int64_t H, int64_t Tq, int64_t Tk,
                                            const kernels::AttentionDropout& dropout);

}  // namespace pelab
