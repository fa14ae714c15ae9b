#include "core/analysis/attention_summary.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

namespace pelab {

torch::Tensor attention_statistic_sums_torch(const torch::Tensor& probs, const torch::Tensor& padding) {
  const int64_t B = probs.size(0), H = probs.size(1), T = probs.size(2);
  auto query_valid = (~padding).to(torch::kFloat64).view({-1, 1, T});  // (B, 1, T)
  auto index = torch::arange(T, torch::TensorOptions().dtype(torch::kFloat64).device(padding.device()));
  auto distance = (index.view({T, 1}) - index.view({1, T})).abs();  // (T, T)
  auto last_index = ((~padding).sum(1) - 1).clamp_min(0);          // (B): the last non-padding token
  auto p = probs.to(torch::kFloat64);                                // (B, H, T, T)
  auto per_query = torch::stack({
      (p * distance).sum(-1),                                                   // mean distance
      -(p * torch::where(p > 0, p.log(), torch::zeros_like(p))).sum(-1),       // entropy
      p.diagonal(0, -2, -1),                                                     // diagonal
      p.select(-1, 0),                                                           // first token
      p.gather(-1, last_index.view({-1, 1, 1, 1}).expand({B, H, T, 1})).squeeze(-1),  // last token
  });  // (5, B, H, T)
  return (per_query * query_valid.unsqueeze(0)).sum({1, 3});
}

torch::Tensor attention_statistic_sums(const torch::Tensor& probs, const torch::Tensor& padding) {
  if (!probs.device().is_cpu() || probs.scalar_type() == torch::kFloat64)
    return attention_statistic_sums_torch(probs, padding);
  // The float64 temporaries of the tensor form are 1.5 GB per layer at B 128, T 240, and their
  // page faults took more system time than the arithmetic took user time; one pass reads p once.
  const auto p = probs.to(torch::kFloat32).contiguous();
  const auto valid = (~padding).to(torch::kCPU).contiguous();
  const int64_t B = p.size(0), H = p.size(1), T = p.size(2);
  const float* data = p.data_ptr<float>();
  const bool* is_valid = valid.data_ptr<bool>();
  // per (example, head) sums, filled in parallel and then added in example order, so that the
  // result does not depend on the thread count
  std::vector<double> partial(static_cast<size_t>(B * H * 5), 0.0);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H;
      int64_t last = -1;
      for (int64_t j = 0; j < T; ++j)
        if (is_valid[b * T + j]) last = j;
      last = std::max<int64_t>(0, last);
      double sums[5] = {0, 0, 0, 0, 0};
      for (int64_t i = 0; i < T; ++i) {
        if (!is_valid[b * T + i]) continue;
        const float* row = data + (bh * T + i) * T;
        double distance = 0, entropy = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double x = row[j];
          distance += x * static_cast<double>(i > j ? i - j : j - i);
          if (x > 0) entropy -= x * std::log(x);
        }
        sums[0] += distance;
        sums[1] += entropy;
        sums[2] += row[i];
        sums[3] += row[0];
        sums[4] += row[last];
      }
      std::copy(sums, sums + 5, partial.begin() + bh * 5);
    }
  });
  auto out = torch::zeros({5, H}, torch::kFloat64);
  auto o = out.accessor<double, 2>();
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t k = 0; k < 5; ++k) o[k][bh % H] += partial[bh * 5 + k];
  return out;
}

void AttentionSummaryAccumulator::add(const std::vector<torch::Tensor>& probs, const torch::Tensor& padding) {
  if (probs.empty()) return;
  const int64_t L = probs.size(), H = probs[0].size(1);
  auto stats = torch::zeros({5, L, H}, torch::kFloat64);
  for (int64_t l = 0; l < L; ++l) stats.select(1, l).copy_(attention_statistic_sums(probs[l], padding).cpu());
  sums_ = sums_.defined() ? sums_ + stats : stats;
  queries_ += (~padding).sum().item<double>();
}

AttentionSummary AttentionSummaryAccumulator::summary() const {
  AttentionSummary s;
  if (!sums_.defined()) return s;
  s.layers = sums_.size(1);
  s.heads = sums_.size(2);
  auto means = (sums_ / std::max(1.0, queries_)).contiguous();
  auto take = [&](int64_t k) {
    auto row = means.select(0, k).contiguous();
    return std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
  };
  s.mean_distance = take(0);
  s.entropy = take(1);
  s.diagonal = take(2);
  s.first = take(3);
  s.last = take(4);
  return s;
}

}  // namespace pelab
