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

}  // namespace pelab
