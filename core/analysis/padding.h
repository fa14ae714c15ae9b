// Whether the padding token's embedding row matters (pelab padding, docs/studies/padding.md):
// a model's logits at real tokens with padding appended, the row zero, random or huge, with
// and without the attention mask, against the unpadded logits.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/encodings/position_encoding.h"
#include "core/model/encoder.h"
#include "data/task.h"

namespace pelab {

// One setting: the padding row, with or without the attention mask.
struct PaddingEffect {
  std::string row;                   // stored (a nonzero row as the model has it) | zero | random | huge
  bool masked = true;
  double max_logit_change = 0;       // max |logit - unpadded logit| over real tokens and classes
  double mean_logit_change = 0;      // its mean
  double changed_predictions = 0;    // share of scored positions whose argmax changed
  double largest_logit = 0;          // max |unpadded logit| over real tokens and classes
  // max_logit_change <= kPaddingRounding x largest_logit: float rounding, not an effect. With the
  // mask, padding changes the products' shapes (and on some CPUs their summation order), not
  // what they sum: 1.8e-7 of logits of a few units on an AMD EPYC with AVX-512, 0 elsewhere.
  bool within_rounding = false;
};

// 1e-5: float32's epsilon (1.2e-7) times the ~100 roundings a logit goes through in a few
// layers of sums over keys and features; at least 50x what was seen, about 39,000x below the
// smallest unmasked change in the shipped study (docs/studies/padding.md).
constexpr double kPaddingRounding = 1e-5;

// model: in eval mode; batch, positions: unpadded examples, (B, T). Appends `pad` padding tokens
// (positions continuing each row); random is N(0, s^2) with s the table's standard deviation,
// huge 1000x that row; a row that is not zero (an imported checkpoint's) is also tried as it is
// ("stored", first). The padding row is restored afterwards.
std::vector<PaddingEffect> padding_effects(Encoder& model, const Batch& batch, const Positions& positions, int64_t pad);

}  // namespace pelab
