#include "core/encodings/additive.h"

namespace pelab {

AdditivePositionEncodingImpl::AdditivePositionEncodingImpl(const EncodingContext& context,
                                                           const OptionValues& options)
    : PositionEncodingImpl(context), inject_(options.get_string("inject")) {}

OptionSpec AdditivePositionEncodingImpl::inject_option(const std::vector<std::string>& more,
                                                       const std::string& more_help) {
  std::vector<std::string> choices = {"input", "every_layer"};
  choices.insert(choices.end(), more.begin(), more.end());
  return OptionSpec::choice("inject", "input", choices,
                            "add at the token embeddings only (BERT) or before every block" + more_help);
}

torch::Tensor AdditivePositionEncodingImpl::embed(torch::Tensor x, const Positions& positions,
                                                  int64_t layer) {
  const bool here = inject_ != "input" ? layer != kInputLayer : layer == kInputLayer;
  if (!here) return x;
  return x + position_vectors(positions.query, layer).to(x.dtype());
}

}  // namespace pelab
