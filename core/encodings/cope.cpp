#include "core/encodings/cope.h"

namespace pelab {

CopeImpl::CopeImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), npos_max_(options.get_int("npos_max")) {
  const int64_t rows = context.causal ? npos_max_ : 2 * npos_max_ - 1;
  const bool normal = options.get_string("init") == "normal";
  for (int64_t l = 0; l < context.num_layers; ++l) {
    if (!context.serves(l)) {
      tables_.emplace_back();
      continue;
    }
    auto table = normal ? torch::randn({rows, context.head_dim()}) * 0.02 : torch::zeros({rows, context.head_dim()});
    tables_.push_back(register_parameter("table_" + std::to_string(l), table));
  }
}

std::string CopeImpl::description() {
  return "CoPE: positions counted by gates sigmoid(q.k) over the keys between query and key, "
         "interpolated embeddings added to the logits (causal; signed counts bidirectionally)";
}

std::vector<OptionSpec> CopeImpl::options() {
  return {
      OptionSpec::integer("npos_max", 64, "counts are clamped below this; table rows (per direction)", 2, 1 << 20),
      OptionSpec::choice("init", "zeros", {"zeros", "normal"}, "initial tables: zeros (the reference) or N(0, 0.02^2)"),
  };
}

torch::Tensor CopeImpl::contextual_positions(const torch::Tensor& q, const torch::Tensor& k) const {
  TORCH_CHECK(q.size(2) == k.size(2), "cope: queries and keys must be the same tokens, got ", q.size(2), " and ",
              k.size(2));
  const int64_t T = q.size(2);
  // (B, H, T, T), in float32 also under autocast: counts need the fractions
  const auto gates = torch::sigmoid(torch::matmul(q * attention_scale(), k.transpose(-2, -1)).to(torch::kFloat32));
  const auto at_or_before = torch::ones({T, T}, gates.options().dtype(torch::kBool)).tril();  // j <= i
  // sum_{t=j..i} g_it = sum_{t>=j} of the gates of keys t <= i: a reverse cumulative sum
  const auto before = (gates * at_or_before).flip(-1).cumsum(-1).flip(-1);
  if (context_.causal) return before.clamp_max(static_cast<double>(npos_max_ - 1));
  // j > i: -sum_{t=i..j} g_it, a cumulative sum of the gates of keys t >= i
  const auto after = (gates * at_or_before.t()).cumsum(-1);  // at_or_before.t(): j >= i
  const double limit = static_cast<double>(npos_max_ - 1);
  return torch::where(at_or_before, before, -after).clamp(-limit, limit);
}

torch::Tensor CopeImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const auto& table = tables_.at(attention.layer);
  // Row of each (fractional) count: counts start at row 0 causally, at row npos_max - 1 otherwise.
  const auto rows = contextual_positions(q, k) + (context_.causal ? 0.0 : static_cast<double>(npos_max_ - 1));
  const auto floor = rows.floor();
  const auto weight = rows - floor;  // w: gradients reach the gates (and so q, k) through it
  const auto lower = floor.to(torch::kInt64);
  const auto upper = rows.ceil().to(torch::kInt64);
  const auto per_row = torch::matmul(q, table.to(q.scalar_type()).t());  // (B, H, T, rows): q_i . e[r]
  return per_row.gather(-1, upper) * weight + per_row.gather(-1, lower) * (1 - weight);
}

}  // namespace pelab
