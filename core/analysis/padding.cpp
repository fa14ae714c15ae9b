#include "core/analysis/padding.h"

namespace pelab {

namespace {

// positions: (B, T) -> (B, T + pad), continuing each row past its last position
torch::Tensor continue_positions(const torch::Tensor& positions, int64_t pad) {
  auto steps = torch::arange(1, pad + 1, positions.options()).unsqueeze(0);  // (1, pad)
  return torch::cat({positions, positions.slice(1, -1) + steps}, 1);
}

}  // namespace

std::vector<PaddingEffect> padding_effects(Encoder& model, const Batch& batch, const Positions& positions, int64_t pad) {
  torch::NoGradGuard no_grad;
  const int64_t T = batch.tokens.size(1);
  const auto reference = model->forward(batch.tokens, batch.padding, positions, batch.segments).logits;  // (B, T, C)
  const Batch padded = batch.padded(pad);
  const Positions padded_positions(continue_positions(positions.query, pad), continue_positions(positions.key, pad));
  model->encoding().validate_positions(padded_positions);  // a table too short throws here, before the row changes
  const auto real = (~batch.padding).unsqueeze(-1);  // (B, T, 1)
  const auto scored = batch.scored;
  auto table = model->named_parameters()["token_embedding.weight"];  // (V, D)
  const auto saved = table[kPadToken].clone();
  const double scale = table.slice(0, 1).std().item<double>();
  torch::Generator generator = at::detail::createCPUGenerator(0);
  const auto random_row = torch::randn({table.size(1)}, generator).to(table.device()) * scale;
  std::vector<std::pair<std::string, torch::Tensor>> rows = {
      {"zero", torch::zeros_like(saved)}, {"random", random_row}, {"huge", random_row * 1000.0}};
  // a row that is not zero (an imported checkpoint's: pelab keeps its own at zero) as it is, first
  if (saved.abs().max().item<double>() > 0) rows.insert(rows.begin(), {"stored", saved});
  std::vector<PaddingEffect> effects;
  for (const auto& [name, row] : rows) {
    table[kPadToken].copy_(row);
    for (bool masked : {true, false}) {
      const auto logits = model->forward(padded.tokens, masked ? padded.padding : torch::Tensor(), padded_positions,
                                         padded.segments).logits.slice(1, 0, T);
      const auto change = (logits - reference).abs() * real;
      PaddingEffect e;
      e.row = name;
      e.masked = masked;
      e.max_logit_change = change.max().item<double>();
      e.mean_logit_change = (change.sum() / (real.sum() * logits.size(-1))).item<double>();
      const auto differs = logits.argmax(-1).ne(reference.argmax(-1)).logical_and(scored);
      e.changed_predictions = differs.sum().item<double>() / std::max<double>(1.0, scored.sum().item<double>());
      e.largest_logit = (reference.abs() * real).max().item<double>();
      e.within_rounding = e.max_logit_change <= kPaddingRounding * e.largest_logit;
      effects.push_back(e);
    }
  }
  table[kPadToken].copy_(saved);
  return effects;
}

}  // namespace pelab
