#include "core/model/flops.h"

namespace pelab {

double encoder_forward_flops(const ModelConfig& model, int64_t batch, int64_t tokens, int64_t num_classes) {
  const double B = batch, T = tokens, D = model.d_model, F = model.d_ff, C = num_classes;
  const double projections = 2 * B * T * (3 * D * D + D * D);
  // the (query, key) pairs a query attends to: T^2, or causal T (T + 1) / 2
  const double pairs = model.causal ? T * (T + 1) / 2 : T * T;
  const double attention = 2 * (2 * B * pairs * D);
  const double feed_forward = 2 * (2 * B * T * D * F);
  return model.num_layers * (projections + attention + feed_forward) + 2 * B * T * D * C;
}

}  // namespace pelab
