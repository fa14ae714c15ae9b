#include "core/encodings/head_groups.h"

#include <cmath>
#include <limits>
#include <map>

namespace pelab {

HeadGroupsImpl::HeadGroupsImpl(const EncodingContext& context, std::vector<PositionEncoding> groups)
    : PositionEncodingImpl(context), groups_(std::move(groups)) {
  TORCH_CHECK(!groups_.empty(), "encoding_heads: no group");
  int64_t first = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& scheme = *groups_[g];
    TORCH_CHECK(!scheme.adds_to_residual(), "encoding_heads: '", scheme.context().scheme,
                "' adds position vectors to the residual stream, which every head reads; a head group needs a scheme "
                "that acts inside attention (rotations, biases, value terms)");
    TORCH_CHECK(std::abs(scheme.attention_scale() - attention_scale()) <= 1e-12 * attention_scale(),
                "encoding_heads: '", groups_.front()->context().scheme, "' and '", scheme.context().scheme,
                "' scale the scores differently (", attention_scale(), " and ", scheme.attention_scale(),
                "); group schemes with the same attention scale");
    TORCH_CHECK(scheme.context().num_heads >= 1, "encoding_heads: group ", g, " has no heads");
    heads_.push_back(scheme.context().num_heads);
    first_head_.push_back(first);
    first += heads_.back();
    register_module("group_" + std::to_string(g), groups_[g]);
  }
  TORCH_CHECK(first == context.num_heads, "encoding_heads: the groups have ", first, " heads, the model ",
              context.num_heads);
}

void HeadGroupsImpl::check_positions(const Positions& positions) const {
  for (const auto& scheme : groups_) scheme->validate_positions(positions);
}

AttentionContext HeadGroupsImpl::group_context(const AttentionContext& attention, int64_t g,
                                               std::pair<torch::Tensor, torch::Tensor>& rows) const {
  // qkv_weight (3 D, D): rows [W_q; W_k; W_v], each H Dh rows, head-major
  const int64_t Dh = context_.head_dim(), width = context_.num_heads * Dh;
  auto pick = [&](const torch::Tensor& t) {
    if (!t.defined()) return t;
    std::vector<torch::Tensor> parts;
    for (int64_t third = 0; third < 3; ++third) parts.push_back(t.narrow(0, third * width + first_head_[g] * Dh, heads_[g] * Dh));
    return torch::cat(parts, 0);
  };
  rows = {pick(attention.qkv_weight), pick(attention.qkv_bias)};
  return {attention.positions, attention.layer, rows.first, rows.second, attention.input};
}

std::pair<torch::Tensor, torch::Tensor> HeadGroupsImpl::rotate(torch::Tensor q, torch::Tensor k,
                                                               const AttentionContext& attention) {
  // q, k: (B, H, T, Dh)
  std::vector<torch::Tensor> qs, ks;
  bool rotated = false;
  rotated_width_.assign(groups_.size(), q.size(-1));
  for (int64_t g = 0; g < group_count(); ++g) {
    std::pair<torch::Tensor, torch::Tensor> rows;
    const auto group_q = heads_of(q, g), group_k = heads_of(k, g);
    auto [rq, rk] = groups_[g]->rotate(group_q, group_k, group_context(attention, g, rows));
    rotated = rotated || !rq.is_same(group_q) || !rk.is_same(group_k);
    qs.push_back(rq);
    ks.push_back(rk);
  }
  if (!rotated) return {std::move(q), std::move(k)};  // attention then passes the projection on packed
  // a group may widen its q and k (pope: 2 Dh): the others' get zeros, which add nothing to q.k
  int64_t width = 0;
  for (const auto& t : qs) width = std::max(width, t.size(-1));
  auto widened = [width](const torch::Tensor& t) {
    return t.size(-1) == width ? t : torch::constant_pad_nd(t, {0, width - t.size(-1)});
  };
  for (size_t g = 0; g < qs.size(); ++g) {
    rotated_width_[g] = qs[g].size(-1);
    qs[g] = widened(qs[g]);
    ks[g] = widened(ks[g]);
  }
  return {torch::cat(qs, 1), torch::cat(ks, 1)};
}

torch::Tensor HeadGroupsImpl::join_heads(const std::vector<torch::Tensor>& parts, const std::vector<int64_t>& tail_shape,
                                         const torch::TensorOptions& options) const {
  int64_t batch = 1;
  bool any = false;
  for (const auto& p : parts)
    if (p.defined()) {
      any = true;
      batch = std::max(batch, p.size(0));
    }
  if (!any) return {};
  std::vector<torch::Tensor> full;
  for (int64_t g = 0; g < group_count(); ++g) {
    std::vector<int64_t> shape = {batch, heads_[g]};
    shape.insert(shape.end(), tail_shape.begin(), tail_shape.end());
    full.push_back(parts[g].defined() ? parts[g].expand(shape) : torch::zeros(shape, options));
  }
  return torch::cat(full, 1);
}

torch::Tensor HeadGroupsImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                         const AttentionContext& attention) {
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B|1, H, Tq, Tk) or undefined
  std::vector<torch::Tensor> parts;
  for (int64_t g = 0; g < group_count(); ++g) {
    std::pair<torch::Tensor, torch::Tensor> rows;
    parts.push_back(groups_[g]->score_bias(rotated_heads(q, g), rotated_heads(k, g), group_context(attention, g, rows)));
  }
  return join_heads(parts, {q.size(2), k.size(2)}, q.options());
}

std::vector<ScoreTerm> HeadGroupsImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                   const AttentionContext& attention) {
  // each name's parts from the groups that have it, zeros for the others, in first-seen order
  std::vector<std::string> names;
  std::map<std::string, std::vector<torch::Tensor>> parts;
  for (int64_t g = 0; g < group_count(); ++g) {
    std::pair<torch::Tensor, torch::Tensor> rows;
    for (auto& term : groups_[g]->score_terms(rotated_heads(q, g), rotated_heads(k, g), group_context(attention, g, rows))) {
      if (!parts.count(term.name)) {
        names.push_back(term.name);
        parts[term.name].resize(groups_.size());
      }
      parts[term.name][g] = term.value;  // (B|1, heads of g|1, Tq, Tk): join_heads expands it
    }
  }
  std::vector<ScoreTerm> terms;
  for (const auto& name : names) terms.push_back({name, join_heads(parts[name], {q.size(2), k.size(2)}, q.options())});
  return terms;
}

torch::Tensor HeadGroupsImpl::value_term(const torch::Tensor& probs, const AttentionContext& attention) {
  // probs: (B, H, Tq, Tk) -> (B, H, Tq, Dh) or undefined
  std::vector<torch::Tensor> parts;
  for (int64_t g = 0; g < group_count(); ++g) {
    std::pair<torch::Tensor, torch::Tensor> rows;
    parts.push_back(groups_[g]->value_term(heads_of(probs, g), group_context(attention, g, rows)));
  }
  return join_heads(parts, {probs.size(2), context_.head_dim()}, probs.options());
}

bool HeadGroupsImpl::has_value_term() const {
  return any_group([&](const PositionEncodingImpl& scheme) { return scheme.has_value_term(); });
}

bool HeadGroupsImpl::has_value_term_at(int64_t layer) const {
  return any_group([&](const PositionEncodingImpl& scheme) { return scheme.has_value_term_at(layer); });
}

bool HeadGroupsImpl::replaces_softmax() const {
  return any_group([&](const PositionEncodingImpl& scheme) { return scheme.replaces_softmax(); });
}

bool HeadGroupsImpl::replaces_softmax_at(int64_t layer) const {
  return any_group([&](const PositionEncodingImpl& scheme) { return scheme.replaces_softmax_at(layer); });
}

torch::Tensor HeadGroupsImpl::attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                                const AttentionContext& attention) {
  // scores: (B, H, Tq, Tk); masked: (B|1, 1, Tq|1, Tk) bool or undefined -> (B, H, Tq, Tk)
  std::vector<torch::Tensor> weights;
  for (int64_t g = 0; g < group_count(); ++g) {
    const auto group_scores = heads_of(scores, g);
    if (groups_[g]->replaces_softmax_at(attention.layer)) {
      std::pair<torch::Tensor, torch::Tensor> rows;
      weights.push_back(groups_[g]->attention_weights(group_scores, masked, group_context(attention, g, rows)));
    } else {
      const auto visible =
          masked.defined() ? group_scores.masked_fill(masked, -std::numeric_limits<float>::infinity()) : group_scores;
      weights.push_back(torch::softmax(visible, -1));
    }
  }
  return torch::cat(weights, 1);
}

bool HeadGroupsImpl::supports_extrapolation() const {
  return any_group([&](const PositionEncodingImpl& scheme) { return scheme.supports_extrapolation(); });
}

void HeadGroupsImpl::set_extrapolation(const Extrapolation& extrapolation) {
  const bool none = extrapolation.method == "none";
  TORCH_CHECK(none || supports_extrapolation(), "this position encoding has no extrapolation method '",
              extrapolation.method, "'");
  for (auto& scheme : groups_)  // a rotary group stretches, the others have nothing to
    if (scheme->supports_extrapolation() || none) scheme->set_extrapolation(extrapolation);
}

bool HeadGroupsImpl::shift_invariant() const {
  return !any_group([&](const PositionEncodingImpl& scheme) { return !scheme.shift_invariant(); });
}

std::vector<PositionTable> HeadGroupsImpl::position_tables() const {
  std::vector<PositionTable> tables;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (auto t : groups_[g]->position_tables()) {
      t.parameter = "group_" + std::to_string(g) + "." + t.parameter;
      tables.push_back(t);
    }
  return tables;
}

}  // namespace pelab
