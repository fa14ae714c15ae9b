#include "core/encodings/additive.h"

namespace pelab {

AdditivePositionEncodingImpl::AdditivePositionEncodingImpl(const EncodingContext& context,
                                                           const OptionValues& options)
    : PositionEncodingImpl(context), every_layer_(options.get_string("inject") == "every_layer") {}

OptionSpec AdditivePositionEncodingImpl::inject_option() {
  return OptionSpec::choice("inject", "input", {"input", "every_layer"},
                            "add at the token embeddings only (BERT) or before every block");
}

torch::Tensor AdditivePositionEncodingImpl::embed(torch::Tensor x, const Positions& positions,
                                                  int64_t layer) {
  const bool here = every_layer_ ? layer != kInputLayer : layer == kInputLayer;
  if (!here) return x;
  return x + position_vectors(positions.query).to(x.dtype());
}

}  // namespace pelab
