#include "core/encodings/learned.h"

namespace pelab {

LearnedPositionEncodingImpl::LearnedPositionEncodingImpl(const EncodingContext& context,
                                                         const OptionValues& options)
    : AdditivePositionEncodingImpl(context, options), max_positions_(options.get_int("max_positions")) {
  const bool per_layer = inject() == "per_layer";
  for (int64_t l = 0; l < (per_layer ? context.num_layers : 1); ++l)
    tables_.push_back(per_layer && !context.serves(l)  // encoding_mix: a block of the other scheme
                          ? torch::Tensor()
                          : register_parameter(per_layer ? "table_" + std::to_string(l) : std::string("table"),
                                               torch::randn({max_positions_, context.d_model}) *
                                                   options.get_float("init_std")));
}

std::vector<PositionTable> LearnedPositionEncodingImpl::position_tables() const {
  if (inject() != "per_layer") return {{"table", "position", 0}};  // per_layer: table_<l>, even for one block
  std::vector<PositionTable> tables;
  for (size_t l = 0; l < tables_.size(); ++l)
    if (tables_[l].defined()) tables.push_back({"table_" + std::to_string(l), "position", 0});
  return tables;
}

std::string LearnedPositionEncodingImpl::description() {
  return "trained absolute table of max_positions rows (BERT); longer inputs are an error";
}

std::vector<OptionSpec> LearnedPositionEncodingImpl::options() {
  return {
      OptionSpec::integer("max_positions", 512, "rows of the table: the largest position + 1", 1, 1 << 24),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial table (BERT: 0.02)", 0.0, 10.0),
      inject_option({"per_layer"}, ", or before every block from a table of its own (per_layer)"),
  };
}

void LearnedPositionEncodingImpl::check_positions(const Positions& positions) const {
  if (positions.query.numel() == 0) return;
  const PositionBounds bounds = position_bounds(positions);
  const int64_t largest = bounds.query_max, smallest = bounds.query_min;
  TORCH_CHECK(smallest >= 0, "learned: position ", smallest, " is negative");
  TORCH_CHECK(largest < max_positions_, "learned: position ", largest,
              " does not fit the table of max_positions = ", max_positions_, " rows (sequence length ",
              positions.query.size(1), "); raise encoding.max_positions to at least ", largest + 1,
              " or evaluate shorter lengths");
}

torch::Tensor LearnedPositionEncodingImpl::position_vectors(const torch::Tensor& positions, int64_t layer) {
  const auto& table = tables_.size() == 1 ? tables_.front() : tables_.at(layer);
  return table.index_select(0, positions.reshape(-1)).view({positions.size(0), positions.size(1), -1});
}

}  // namespace pelab
