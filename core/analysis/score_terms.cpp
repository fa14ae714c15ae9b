#include "core/analysis/score_terms.h"

#include <algorithm>
#include <limits>

namespace pelab {

namespace {

// x (B, T, D) W^T [+ b] for the rows [first, first + D) of the fused projection -> (B, H, T, Dh)
torch::Tensor project_heads(const torch::Tensor& x, const AttentionRecord& layer, int64_t first, bool with_bias) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = layer.q.size(1);
  const auto weight = layer.qkv_weight.narrow(0, first, D).to(x.scalar_type());
  auto y = with_bias ? torch::nn::functional::linear(x, weight, layer.qkv_bias.narrow(0, first, D).to(x.scalar_type()))
                     : torch::nn::functional::linear(x, weight);
  return y.view({B, T, H, D / H}).transpose(1, 2);
}

}  // namespace

std::vector<ScoreTerm> layer_score_terms(const AttentionRecord& layer, const AttentionRecord* content) {
  std::vector<ScoreTerm> terms;
  auto product = [&](const torch::Tensor& q, const torch::Tensor& k) {
    return torch::matmul(q * layer.scale, k.transpose(-2, -1));  // (B, H, T, T)
  };
  if (content && !layer.rotated) {
    const int64_t D = layer.input.size(2);
    const auto& c = content->input;
    const auto p = layer.input - c;
    const auto q_content = project_heads(c, layer, 0, true), k_content = project_heads(c, layer, D, true);
    const auto q_position = project_heads(p, layer, 0, false), k_position = project_heads(p, layer, D, false);
    terms = {{"content-content", product(q_content, k_content)},
             {"content-position", product(q_content, k_position)},
             {"position-content", product(q_position, k_content)},
             {"position-position", product(q_position, k_position)}};
  } else {
    terms = {{layer.rotated ? "rotated q.k" : "content-content", product(layer.q, layer.k)}};
  }
  terms.insert(terms.end(), layer.bias_terms.begin(), layer.bias_terms.end());
  if (layer.logit_factor.defined())  // model.logit_scaling: each term scaled as the scores are
    for (auto& term : terms) term.value = term.value * layer.logit_factor;
  return terms;
}

ScoreTermStatistics score_term_statistics(const std::vector<AttentionRecord>& layers,
                                          const std::vector<AttentionRecord>& content, const torch::Tensor& padding,
                                          bool causal, const std::vector<LocalAttention>& local) {
  ScoreTermStatistics out;
  if (layers.empty()) return out;
  TORCH_CHECK(content.empty() || content.size() == layers.size(), "score terms: ", content.size(),
              " content layers for ", layers.size(), " layers");
  const auto& first = layers.front().q;
  const int64_t L = static_cast<int64_t>(layers.size()), B = first.size(0), H = first.size(1), T = first.size(2);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);

  // scored (query, key) pairs: (B, 1, T, T) as float64 weights
  auto scored = torch::ones({B, 1, T, T}, f64.dtype(torch::kBool));
  if (padding.defined()) {
    const auto real = padding.logical_not().cpu();
    scored = scored & real.view({B, 1, T, 1}) & real.view({B, 1, 1, T});
  }
  if (causal) scored = scored & torch::ones({T, T}, f64.dtype(torch::kBool)).tril();
  TORCH_CHECK(local.empty() || static_cast<int64_t>(local.size()) == L, "score terms: ", local.size(),
              " local restrictions for ", L, " layers");
  torch::Tensor weight, pairs;  // the current layer's scored pairs: (B, H, T, T) float64, (H)
  // per head over (B, T, T): the weighted mean of x (B, H, T, T) -> (H)
  auto mean = [&](const torch::Tensor& x) { return (x * weight).sum({0, 2, 3}) / pairs; };

  std::vector<std::vector<ScoreTerm>> per_layer;
  for (int64_t l = 0; l < L; ++l) {
    per_layer.push_back(layer_score_terms(layers[l], content.empty() ? nullptr : &content[l]));
    for (const auto& term : per_layer.back())
      if (std::find(out.names.begin(), out.names.end(), term.name) == out.names.end()) out.names.push_back(term.name);
  }
  const int64_t N = static_cast<int64_t>(out.names.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.mean_abs = torch::full({L, H, N}, nan, f64);
  out.correlation = torch::full({L, H, N}, nan, f64);
  out.scores_mean_abs = torch::zeros({L, H}, f64);
  for (int64_t l = 0; l < L; ++l) {
    std::vector<torch::Tensor> values;  // (B, H, T, T) float64 on the CPU
    for (const auto& term : per_layer[l]) values.push_back(term.value.detach().to(torch::kCPU, torch::kFloat64).expand({B, H, T, T}));
    auto layer_scored = scored.expand({B, H, T, T});
    if (!local.empty() && local[l].any())
      layer_scored = layer_scored & AttentionMask(T, false, torch::kCPU).restricted(local[l]).additive().isfinite();
    for (const auto& v : values) layer_scored = layer_scored & (v > kMaskingBias);
    weight = layer_scored.to(torch::kFloat64);
    pairs = weight.sum({0, 2, 3});
    auto scores = torch::zeros({B, H, T, T}, f64);
    for (const auto& v : values) scores = scores + v;
    out.scores_mean_abs[l] = mean(scores.abs());
    const auto scores_centred = scores - mean(scores).view({1, H, 1, 1});
    const auto scores_spread = mean(scores_centred.square()).sqrt();
    for (size_t t = 0; t < values.size(); ++t) {
      const int64_t n = std::find(out.names.begin(), out.names.end(), per_layer[l][t].name) - out.names.begin();
      const auto centred = values[t] - mean(values[t]).view({1, H, 1, 1});
      const auto spread = mean(centred.square()).sqrt();
      const auto r = mean(centred * scores_centred) / (spread * scores_spread);
      out.mean_abs.select(0, l).select(1, n).copy_(mean(values[t].abs()));
      // a constant term (or scores) has no correlation: NaN, not 0/0's noise
      out.correlation.select(0, l).select(1, n).copy_(
          torch::where((spread > 1e-12) & (scores_spread > 1e-12), r, torch::full_like(r, nan)));
    }
  }
  return out;
}

}  // namespace pelab
