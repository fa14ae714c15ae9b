// `rope`: rotary position embedding (Su et al. 2021, "RoFormer"; x-transformers
// RotaryEmbedding, DeepMind randomized_positional_encodings apply_rotary_encoding, GPT-NeoX /
// LLaMA rotate_half). q and k of position p are rotated by p * base^(-2i/R); q.k then
// depends on the offset query - key only. Layouts, rotary fraction and evaluation-time
// extrapolation: core/encodings/rotary.h. No parameters.
#pragma once

#include "core/encodings/rotary.h"

namespace pelab {

class RopeImpl : public RotaryImpl {
 public:
  RopeImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
};

}  // namespace pelab
