// `none`: NoPE, no position information at all (Kazemnejad et al. 2023, "The Impact of
// Positional Encoding on Length Generalization in Transformers"). Every hook is the
// base-class identity; in causal mode the mask alone lets a model infer positions.
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class NoPositionEncodingImpl : public PositionEncodingImpl {
 public:
  NoPositionEncodingImpl(const EncodingContext& context, const OptionValues& options)
      : PositionEncodingImpl(context) {}
  static std::string description();
  static std::vector<OptionSpec> options() { return {}; }
};

}  // namespace pelab
