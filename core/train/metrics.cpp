#include "core/train/metrics.h"

namespace pelab {

BatchScore score_batch(const torch::Tensor& logits, const Batch& batch) {
  BatchScore s;
  const int64_t C = logits.size(-1);
  auto flat_scored = batch.scored.reshape(-1);
  auto scored_logits = logits.reshape({-1, C}).index({flat_scored});  // (N, C)
  auto scored_targets = batch.targets.reshape(-1).index({flat_scored});
  s.loss = torch::nn::functional::cross_entropy(scored_logits, scored_targets);

  auto correct = (logits.argmax(-1) == batch.targets) | ~batch.scored;  // (B, T): unscored count as right
  auto counts = torch::stack({(correct & batch.scored).sum(), batch.scored.sum(),
                              correct.all(1).sum()}).cpu();
  auto c = counts.accessor<int64_t, 1>();
  s.correct_tokens = c[0];
  s.scored_tokens = c[1];
  s.correct_sequences = c[2];
  s.sequences = batch.tokens.size(0);
  return s;
}

void ChanceLevel::add(const Batch& batch) {
  targets_.push_back(batch.targets.cpu());
  scored_.push_back(batch.scored.cpu());
}

ChanceScore ChanceLevel::score() const {
  ChanceScore out;
  if (targets_.empty()) return out;
  auto targets = torch::cat(targets_);  // (N, T)
  auto scored = torch::cat(scored_);
  const int64_t N = targets.size(0), T = targets.size(1), C = num_classes_;
  const int64_t cells = per_position_ ? T : 1;
  // counts[cell][class] over scored targets; cell = position t, or one cell for all
  auto cell = per_position_ ? torch::arange(T).expand({N, T}) : torch::zeros({N, T}, torch::kInt64);
  auto index = (cell * C + targets).masked_select(scored);
  auto counts = torch::bincount(index, {}, cells * C).view({cells, C}).to(torch::kFloat64);
  const double total = counts.sum().item<double>();
  if (total == 0) return out;
  auto [best, mode] = counts.max(1);  // (cells)
  out.token_accuracy = best.sum().item<double>() / total;
  auto per_cell = counts.sum(1, true);
  auto p = counts / per_cell.clamp_min(1);
  auto entropy = -(p * torch::where(p > 0, p.log(), torch::zeros_like(p))).sum(1);  // (cells)
  out.loss = (entropy * per_cell.squeeze(1)).sum().item<double>() / total;
  auto predicted = per_position_ ? mode.unsqueeze(0).expand({N, T}) : mode.expand({N, T});
  auto sequence_right = ((targets == predicted) | ~scored).all(1);
  out.sequence_accuracy = sequence_right.to(torch::kFloat64).mean().item<double>();
  return out;
}

}  // namespace pelab
