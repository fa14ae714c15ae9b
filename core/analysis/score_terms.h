// The attention-term analysis: each layer's attention scores split into the terms a scheme's
// design keeps, and how much each weighs (docs/analysis.md, "Attention terms").
//
// Additive absolute schemes (learned, sinusoidal; adds_to_residual): a layer's attention
// input a is split as a = c + p, c the input of the same forward without the position
// embeddings (the content) and p = a - c (what the encoding changed). With q = a W_q + b_q,
// k = a W_k + b_k the scores split exactly (Ke et al. 2021's expansion, TUPE section 3):
//   content-content   (c W_q + b_q)(c W_k + b_k)^T * scale
//   content-position  (c W_q + b_q)(p W_k)^T * scale
//   position-content  (p W_q)(c W_k + b_k)^T * scale
//   position-position (p W_q)(p W_k)^T * scale
// Other schemes: q.k * scale is one term, "content-content", or "rotated q.k" where rotate
// changed q and k (rotary schemes mix content and position in one product). The scheme's
// own score_terms follow (a position bias; DeBERTa's c2p, p2c; ...). The terms of a layer
// add up to its scores before the mask.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/model/attention.h"

namespace pelab {

struct ScoreTermStatistics {
  std::vector<std::string> names;  // the terms, in order of first appearance over the layers
  torch::Tensor mean_abs;          // (layers, heads, terms) float64: mean |term| over the scored pairs,
                                   //   NaN where a layer has no such term
  torch::Tensor correlation;       // (layers, heads, terms) float64: Pearson r of the term with the
                                   //   scores over the scored pairs, NaN where either is constant
  torch::Tensor scores_mean_abs;   // (layers, heads) float64: mean |scores|
  bool empty() const { return names.empty(); }
};

// The terms of one layer (name, (B|1, H|1, T, T)); their sum is the layer's scores before
// the mask. `content`: the same layer in the forward without position embeddings (split
// into four terms when q, k were not rotated), or nullptr (q.k stays one term).
std::vector<ScoreTerm> layer_score_terms(const AttentionRecord& layer, const AttentionRecord* content);

// A bias at or below this masks its pair as the mask would (hard_alibi's -1e9 outside a
// head's window): such pairs are not scored.
constexpr double kMaskingBias = -1e8;

// Statistics over the scored (query, key) pairs: neither is padding, causally the key is not
// after the query, the pair is inside the layer's local restriction (`local`, one per layer, or
// empty: none) and no term masks it (kMaskingBias). layers: a forward's score_parts; content:
// the score_parts of the forward without position embeddings, or empty; padding: (B, T) bool
// or undefined.
ScoreTermStatistics score_term_statistics(const std::vector<AttentionRecord>& layers,
                                          const std::vector<AttentionRecord>& content, const torch::Tensor& padding,
                                          bool causal, const std::vector<LocalAttention>& local = {});

}  // namespace pelab
