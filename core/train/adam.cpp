#include "core/train/adam.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace pelab {

AdamStep::AdamStep(std::vector<torch::Tensor> parameters, const TrainConfig& train)
    : parameters_(std::move(parameters)),
      exp_avg_(parameters_.size()),
      exp_avg_sq_(parameters_.size()),
      steps_(parameters_.size(), 0),
      beta1_(train.beta1),
      beta2_(train.beta2),
      eps_(train.eps),
      weight_decay_(train.weight_decay),
      decoupled_(train.optimizer == "adamw") {}

AdamStep::Update AdamStep::gather(bool every) {
  Update u;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto& p = parameters_[i];
    TORCH_CHECK(p.grad().defined() || !every, "step_with: every parameter needs a gradient");
    if (!p.grad().defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      exp_avg_sq_[i] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    }
    u.params.push_back(p);
    u.grads.push_back(p.grad());
    u.exp_avg.push_back(exp_avg_[i]);
    u.exp_avg_sq.push_back(exp_avg_sq_[i]);
    u.index.push_back(i);
  }
  return u;
}

std::vector<torch::Tensor> AdamStep::update_moments(Update& u) {
  if (weight_decay_ != 0 && !decoupled_) u.grads = at::_foreach_add(u.grads, u.params, weight_decay_);  // g + wd p
  at::_foreach_mul_(u.exp_avg, beta1_);  // m = beta1 m + (1 - beta1) g
  at::_foreach_add_(u.exp_avg, u.grads, 1 - beta1_);
  at::_foreach_mul_(u.exp_avg_sq, beta2_);  // v = beta2 v + (1 - beta2) g^2
  at::_foreach_addcmul_(u.exp_avg_sq, u.grads, u.grads, 1 - beta2_);
  return at::_foreach_sqrt(u.exp_avg_sq);
}

void AdamStep::step(double learning_rate) {
  torch::NoGradGuard no_grad;
  Update u = gather(/*every=*/false);
  if (u.params.empty()) return;
  std::vector<c10::Scalar> sqrt_bias_correction2, step_size;
  for (size_t i : u.index) {
    const int64_t step = ++steps_[i];
    sqrt_bias_correction2.emplace_back(std::sqrt(1 - std::pow(beta2_, step)));
    step_size.emplace_back(-learning_rate / (1 - std::pow(beta1_, step)));
  }
  if (weight_decay_ != 0 && decoupled_) at::_foreach_mul_(u.params, 1 - learning_rate * weight_decay_);  // AdamW
  auto denominator = update_moments(u);  // sqrt(v) / sqrt(1 - beta2^t) + eps
  at::_foreach_div_(denominator, sqrt_bias_correction2);
  at::_foreach_add_(denominator, eps_);
  at::_foreach_addcdiv_(u.params, u.exp_avg, denominator, step_size);  // p -= lr / (1 - beta1^t) m / denominator
}

bool AdamStep::uniform_steps() const {
  return std::all_of(steps_.begin(), steps_.end(), [&](int64_t s) { return s == steps_.front(); });
}

torch::Tensor AdamStep::next_step_scalars(double learning_rate) const {
  const int64_t step = (steps_.empty() ? 0 : steps_.front()) + 1;
  return torch::tensor({static_cast<float>(1 - learning_rate * weight_decay_),
                        static_cast<float>(-learning_rate / (1 - std::pow(beta1_, step))),
                        static_cast<float>(std::sqrt(1 - std::pow(beta2_, step)))},
                       torch::kFloat32);
}

void AdamStep::advance_steps() {
  for (auto& s : steps_) ++s;
}

void AdamStep::step_with(const torch::Tensor& scalars) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  torch::NoGradGuard no_grad;
  TORCH_CHECK(scalars.dim() == 1 && scalars.size(0) == 3, "step_with: (3) scalars, got ", scalars.sizes());
  Update u = gather(/*every=*/true);
  if (u.params.empty()) return;
  const auto decay = scalars[0], step_size = scalars[1], sqrt_bias_correction2 = scalars[2];  // 0-dim
  if (weight_decay_ != 0 && decoupled_) at::_foreach_mul_(u.params, decay);
  auto denominator = update_moments(u);
  at::_foreach_div_(denominator, sqrt_bias_correction2);
  at::_foreach_add_(denominator, eps_);
  at::_foreach_div_(denominator, step_size);               // (sqrt(v) / sqrt(1 - beta2^t) + eps) / step size
  at::_foreach_addcdiv_(u.params, u.exp_avg, denominator);  // p += m / that
#else
  (void)scalars;
  throw std::runtime_error("AdamStep::step_with needs LibTorch 2.1 or later (this is " TORCH_VERSION ")");
#endif
}

void AdamStep::clear_gradients() {
  for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
}

std::vector<std::pair<std::string, torch::Tensor>> AdamStep::state(const std::vector<std::string>& names) const {
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    state.emplace_back("step." + names.at(i), torch::tensor({steps_[i]}, torch::kInt64));  // (1,)
    if (!exp_avg_[i].defined()) continue;
    state.emplace_back("exp_avg." + names[i], exp_avg_[i].detach().to(torch::kCPU, false, true));
    state.emplace_back("exp_avg_sq." + names[i], exp_avg_sq_[i].detach().to(torch::kCPU, false, true));
  }
  return state;
}

void AdamStep::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state,
                          const std::vector<std::string>& names) {
  std::map<std::string, torch::Tensor> stored(state.begin(), state.end());
  auto find = [&](const std::string& name) {
    auto it = stored.find(name);
    return it == stored.end() ? torch::Tensor() : it->second;
  };
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto step = find("step." + names.at(i));
    if (!step.defined())
      throw std::runtime_error("the optimizer state has no step count of parameter '" + names[i] + "'");
    steps_[i] = step.item<int64_t>();
    const auto m = find("exp_avg." + names[i]), v = find("exp_avg_sq." + names[i]);
    if (steps_[i] > 0 && (!m.defined() || !v.defined() || m.sizes() != parameters_[i].sizes()))
      throw std::runtime_error("the optimizer state of parameter '" + names[i] + "' is missing or of another shape");
    const auto options = parameters_[i].options();
    exp_avg_[i] = m.defined() ? m.to(options).contiguous() : torch::Tensor();
    exp_avg_sq_[i] = v.defined() ? v.to(options).contiguous() : torch::Tensor();
  }
}

namespace {

// The global 2-norm of the gradients as torch::nn::utils::clip_grad_norm_ computes it (the
// norm of the per-parameter norms), in their dtype; undefined without any gradient.
torch::Tensor total_gradient_norm(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : parameters)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  return norms.empty() ? torch::Tensor() : torch::stack(norms).norm(2);
}

}  // namespace

torch::Tensor gradient_norm(const std::vector<torch::Tensor>& parameters) {
  const auto total = total_gradient_norm(parameters);
  return total.defined() ? total.to(torch::kFloat64) : torch::zeros({}, torch::kFloat64);
}

torch::Tensor clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  const auto total = total_gradient_norm(parameters);
  if (!total.defined()) return torch::zeros({}, torch::kFloat64);
  const auto scale = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);  // as clip_grad_norm_
  for (const auto& p : parameters)
    if (p.grad().defined()) p.grad().mul_(scale);
  return total.to(torch::kFloat64);
}

}  // namespace pelab
