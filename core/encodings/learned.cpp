#include "core/encodings/learned.h"

namespace pelab {

LearnedPositionEncodingImpl::LearnedPositionEncodingImpl(const EncodingContext& context,
                                                         const OptionValues& options)
    : AdditivePositionEncodingImpl(context, options), max_positions_(options.get_int("max_positions")) {
  table_ = register_parameter("table", torch::randn({max_positions_, context.d_model}) *
                                           options.get_float("init_std"));
}

std::string LearnedPositionEncodingImpl::description() {
  return "trained absolute table of max_positions rows (BERT); longer inputs are an error";
}

std::vector<OptionSpec> LearnedPositionEncodingImpl::options() {
  return {
      OptionSpec::integer("max_positions", 512, "rows of the table: the largest position + 1", 1, 1 << 24),
      OptionSpec::real("init_std", 0.02, "standard deviation of the initial table (BERT: 0.02)", 0.0, 10.0),
      inject_option(),
  };
}

void LearnedPositionEncodingImpl::check_positions(const Positions& positions) const {
  if (positions.query.numel() == 0) return;
  const int64_t largest = positions.query.max().item<int64_t>();
  const int64_t smallest = positions.query.min().item<int64_t>();
  TORCH_CHECK(smallest >= 0, "learned: position ", smallest, " is negative");
  TORCH_CHECK(largest < max_positions_, "learned: position ", largest,
              " does not fit the table of max_positions = ", max_positions_, " rows (sequence length ",
              positions.query.size(1), "); raise encoding.max_positions to at least ", largest + 1,
              " or evaluate shorter lengths");
}

torch::Tensor LearnedPositionEncodingImpl::position_vectors(const torch::Tensor& positions) {
  return table_.index_select(0, positions.reshape(-1)).view({positions.size(0), positions.size(1), -1});
}

}  // namespace pelab
