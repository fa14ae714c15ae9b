#include "core/train/metrics.h"

namespace pelab {

torch::Tensor scored_cross_entropy(const torch::Tensor& logits, const Batch& batch, bool select_scored) {
  const int64_t C = logits.size(-1);
  if (select_scored) {
    auto flat_scored = batch.scored.reshape(-1);
    auto scored_logits = logits.reshape({-1, C}).index({flat_scored});  // (N, C)
    auto scored_targets = batch.targets.reshape(-1).index({flat_scored});
    return torch::nn::functional::cross_entropy(scored_logits, scored_targets);
  }
  constexpr int64_t kIgnored = -100;
  auto targets = batch.targets.masked_fill(~batch.scored, kIgnored).reshape(-1);  // (B T)
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, C}), targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnored));
}

BatchScore score_batch(const torch::Tensor& logits, const Batch& batch, bool read_counts) {
  BatchScore s;
  s.loss = scored_cross_entropy(logits, batch, /*select_scored=*/logits.device().is_cpu());
  auto correct = (logits.argmax(-1) == batch.targets) | ~batch.scored;  // (B, T): unscored count as right
  s.counts = torch::stack({(correct & batch.scored).sum(), batch.scored.sum(), correct.all(1).sum()});
  s.sequences = batch.tokens.size(0);
  if (!read_counts) return s;
  const auto counts = s.counts.cpu();
  auto c = counts.accessor<int64_t, 1>();
  s.correct_tokens = c[0];
  s.scored_tokens = c[1];
  s.correct_sequences = c[2];
  return s;
}

void PositionFreeLevel::add(const Batch& batch) {
  if (!batch.position_free.defined()) return;
  defined_ = true;
  const auto scored = batch.scored.to(torch::kCPU);
  const auto hit = (batch.position_free.to(torch::kCPU) == batch.targets.to(torch::kCPU)) & scored;
  const auto right = hit | ~scored;
  correct_ += hit.sum().item<int64_t>();
  scored_ += scored.sum().item<int64_t>();
  correct_sequences_ += right.all(1).sum().item<int64_t>();
  sequences_ += scored.size(0);
}

PositionFreeScore PositionFreeLevel::score() const {
  if (!defined_) return {};
  return {static_cast<double>(correct_) / std::max<int64_t>(1, scored_),
          static_cast<double>(correct_sequences_) / std::max<int64_t>(1, sequences_)};
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
  auto cell = per_position_ ? torch::arange(T).expand({N, T}) : torch::zeros({N, T}, torch::kInt64);
  auto cell_class = cell * C + targets;  // (N, T)
  // counts[cell][class] of the scored targets of `rows`
  auto counts_of = [&](const torch::Tensor& rows) {
    auto index = cell_class.index({rows}).masked_select(scored.index({rows}));
    return torch::bincount(index, {}, cells * C).view({cells, C}).to(torch::kFloat64);
  };
  auto all_rows = torch::ones({N}, torch::kBool);
  auto counts = counts_of(all_rows);
  const double total = counts.sum().item<double>();
  if (total == 0) return out;

  // Accuracy, cross-fitted so that the mode is not chosen on the targets it is scored on
  // (in-sample, 256 draws of 26 equally likely symbols would show 6.5% instead of 3.8%):
  // the mode of the even rows predicts the odd rows and the other way round.
  auto even = torch::arange(N) % 2 == 0;
  auto odd = ~even;
  auto predicted = torch::zeros({N, T}, torch::kInt64);
  for (const auto& [fit, apply] : {std::pair{even, odd}, std::pair{odd, even}}) {
    const auto fit_counts = counts_of(N > 1 ? fit : all_rows);  // (cells, C)
    // a position no fitting row scores (outputs of varying length) takes their mode over all
    // positions (class 0 only when they score nothing at all)
    const auto pooled = fit_counts.sum(0).argmax();  // ()
    auto mode = torch::where(fit_counts.sum(1) > 0, std::get<1>(fit_counts.max(1)), pooled);  // (cells)
    auto row_prediction = per_position_ ? mode.unsqueeze(0).expand({N, T}) : mode.expand({N, T});
    predicted = torch::where(apply.unsqueeze(1).expand({N, T}), row_prediction, predicted);
  }
  auto right = targets == predicted;
  out.token_accuracy = (right & scored).sum().item<double>() / total;
  out.sequence_accuracy = (right | ~scored).all(1).to(torch::kFloat64).mean().item<double>();

  // Loss: entropy of each cell's targets with the Miller-Madow correction (K - 1) / 2n for
  // the downward bias of the plug-in estimate (K: classes seen, n: targets of the cell).
  auto per_cell = counts.sum(1);
  auto p = counts / per_cell.clamp_min(1).unsqueeze(1);
  auto entropy = -(p * torch::where(p > 0, p.log(), torch::zeros_like(p))).sum(1);  // (cells)
  auto seen = (counts > 0).sum(1).to(torch::kFloat64);
  auto corrected = torch::where(per_cell > 0, entropy + (seen - 1) / (2 * per_cell.clamp_min(1)), entropy);
  out.loss = (corrected * per_cell).sum().item<double>() / total;
  return out;
}

}  // namespace pelab
