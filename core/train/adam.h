// Adam and AdamW (decoupled weight decay) as one multi-tensor step over every parameter
// (ATen's _foreach_* kernels: a few launches per step on a GPU instead of about ten per
// parameter), with the arithmetic of torch::optim::Adam / AdamW step for step, so that on the
// CPU the parameters equal theirs bit for bit (tests/test_trainer.cpp). Also the global-norm
// gradient clipping, kept on the device (no read-back).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"

namespace pelab {

class AdamStep {
 public:
  // train.optimizer (adam | adamw), betas, eps and weight_decay from `train`.
  AdamStep(std::vector<torch::Tensor> parameters, const TrainConfig& train);

  // One update of every parameter that has a gradient (the others keep their state, as
  // torch::optim skips them), at `learning_rate`.
  void step(double learning_rate);
  // Drops every gradient (the next backward writes them rather than adding to zeros).
  void clear_gradients();

  // For a CUDA graph of the whole training step (core/train/cuda_graph_step.h), whose
  // recorded kernels keep the numbers they were captured with. Such a step updates every
  // parameter, so all must have taken the same number of steps (uniform_steps); the numbers
  // that change from step to step go in a (3) float32 tensor made by next_step_scalars on the
  // host, [decay 1 - lr wd (AdamW), step size -lr / (1 - beta1^t), sqrt(1 - beta2^t)], copied
  // to the device before each replay. step_with is step() reading them from there (equal to
  // float rounding: it divides by the step size rather than multiplying); advance_steps
  // counts the step on the host. LibTorch 2 only (its _foreach_ ops taking a tensor scalar).
  bool uniform_steps() const;
  torch::Tensor next_step_scalars(double learning_rate) const;
  void step_with(const torch::Tensor& scalars);
  void advance_steps();

  // The state (per parameter: its step count, first and second moments) by the parameters'
  // `names` (in the order given to the constructor), and back.
  std::vector<std::pair<std::string, torch::Tensor>> state(const std::vector<std::string>& names) const;
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state,
                  const std::vector<std::string>& names);

 private:
  // The parameters that have a gradient (with `every`, all of them, or an error), their
  // gradients and moments (made at a parameter's first step), and their indices.
  struct Update {
    std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq;
    std::vector<size_t> index;
  };
  Update gather(bool every);
  // Adam's moments, m = beta1 m + (1 - beta1) g and v = beta2 v + (1 - beta2) g^2, with Adam's
  // (coupled) weight decay added to g first -> sqrt(v)
  std::vector<torch::Tensor> update_moments(Update& update);

  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;  // undefined until a parameter's first step
  std::vector<int64_t> steps_;
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;  // AdamW
};

// Scales every gradient so that their global 2-norm is at most `max_norm`, as
// torch::nn::utils::clip_grad_norm_ does, and returns that norm (before clipping) as a scalar
// tensor on the device: nothing is read back.
torch::Tensor clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm);
// The global 2-norm of the gradients, a scalar float64 tensor on the device (0 without any).
torch::Tensor gradient_norm(const std::vector<torch::Tensor>& parameters);

}  // namespace pelab
