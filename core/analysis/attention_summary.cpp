#include "core/analysis/attention_summary.h"

namespace pelab {

void AttentionSummaryAccumulator::add(const std::vector<torch::Tensor>& probs, const torch::Tensor& padding) {
  if (probs.empty()) return;
  const int64_t L = probs.size(), H = probs[0].size(1), T = probs[0].size(2);
  auto query_valid = (~padding).to(torch::kFloat64).view({-1, 1, T});  // (B, 1, T)
  auto index = torch::arange(T, torch::TensorOptions().dtype(torch::kFloat64).device(padding.device()));
  auto distance = (index.view({T, 1}) - index.view({1, T})).abs();  // (T, T)
  // last non-padding token of each row: (B)
  auto lengths = (~padding).sum(1);
  auto last_index = (lengths - 1).clamp_min(0);
  auto stats = torch::zeros({5, L, H}, torch::kFloat64);
  for (int64_t l = 0; l < L; ++l) {
    auto p = probs[l].to(torch::kFloat64);  // (B, H, T, T)
    auto per_query = torch::stack({
        (p * distance).sum(-1),                                                   // mean distance
        -(p * torch::where(p > 0, p.log(), torch::zeros_like(p))).sum(-1),       // entropy
        p.diagonal(0, -2, -1),                                                     // diagonal
        p.select(-1, 0),                                                           // first token
        p.gather(-1, last_index.view({-1, 1, 1, 1}).expand({p.size(0), H, T, 1})).squeeze(-1),  // last token
    });  // (5, B, H, T)
    stats.select(1, l).copy_((per_query * query_valid.unsqueeze(0)).sum({1, 3}).cpu());
  }
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
