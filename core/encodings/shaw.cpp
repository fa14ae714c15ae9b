#include "core/encodings/shaw.h"

#include "core/encodings/relative.h"

namespace pelab {

ShawImpl::ShawImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), clip_(options.get_int("clip")) {
  const double init_std = options.get_float("init_std");
  const bool values = options.get_bool("values");
  for (int64_t l = 0; l < context.num_layers; ++l) {
    const std::string suffix = "_" + std::to_string(l);
    if (!context.serves(l)) {  // encoding_mix: a block of the other scheme
      key_tables_.emplace_back();
      if (values) value_tables_.emplace_back();
      continue;
    }
    key_tables_.push_back(
        register_parameter("key_table" + suffix, torch::randn({2 * clip_ + 1, context.head_dim()}) * init_std));
    if (values)
      value_tables_.push_back(
          register_parameter("value_table" + suffix, torch::randn({2 * clip_ + 1, context.head_dim()}) * init_std));
  }
}

std::vector<PositionTable> ShawImpl::position_tables() const {
  std::vector<PositionTable> tables;
  for (int64_t l = 0; l < context().num_layers; ++l) {
    if (!context().serves(l)) continue;
    tables.push_back({"key_table_" + std::to_string(l), "offset", -clip_});
    if (has_value_term()) tables.push_back({"value_table_" + std::to_string(l), "offset", -clip_});
  }
  return tables;
}

std::string ShawImpl::description() {
  return "Shaw et al. 2018: clipped relative key and value tables per layer (tensor2tensor)";
}

std::vector<OptionSpec> ShawImpl::options() {
  return {
      OptionSpec::integer("clip", 16, "k: relative distances are clipped to [-k, k]", 1, 1 << 20),
      OptionSpec::boolean("values", true, "also add the relative value term aV (Shaw's eq. 3)"),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial tables", 0.0, 10.0),
  };
}

torch::Tensor ShawImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  auto rows = key_tables_[attention.layer].index_select(0, table_row(geometry.offsets()));  // (W, Dh)
  return geometry.query_scores(q * attention_scale(), rows);  // e = q (k + aK)^T / sqrt(Dh)
}

RelativeRows ShawImpl::relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) {
  const RelativeGeometry geometry(attention.positions);
  if (!geometry.contiguous()) return {};
  // the 2k + 1 rows of the offsets -k .. k: the kernel spreads the end rows over farther keys
  const auto rows = table_row(torch::arange(-clip_, clip_ + 1, geometry.offsets().options()));
  RelativeRows terms;
  terms.clip = clip_;
  terms.query = key_tables_[attention.layer].index_select(0, rows);  // aK: e_ij = s q_i . (k_j + aK_ij)
  if (!value_tables_.empty()) terms.value = value_tables_[attention.layer].index_select(0, rows);  // aV
  return terms;
}

torch::Tensor ShawImpl::value_term(const torch::Tensor& probs, const AttentionContext& attention) {
  if (value_tables_.empty()) return {};
  const RelativeGeometry geometry(attention.positions);
  auto rows = value_tables_[attention.layer].index_select(0, table_row(geometry.offsets()));  // (W, Dh)
  return geometry.weighted_rows(probs, rows);
}

}  // namespace pelab
