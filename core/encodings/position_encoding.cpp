#include "core/encodings/position_encoding.h"

#include <cmath>

namespace pelab {

Positions contiguous_positions(int64_t batch, int64_t length, torch::Device device) {
  auto row = torch::arange(length, torch::TensorOptions().dtype(torch::kInt64).device(device));
  auto positions = row.unsqueeze(0).expand({batch, length});
  return {positions, positions};
}

torch::Tensor collapse_broadcast_rows(const torch::Tensor& positions) {
  return positions.size(0) > 1 && positions.stride(0) == 0 ? positions.narrow(0, 0, 1) : positions;
}

RelativeRows PositionEncodingImpl::checked_relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                                         const AttentionContext& attention) {
  RelativeRows rows = relative_rows(q, k, attention);
  if (!rows.defined()) return rows;
  const std::string who = (context_.scheme.empty() ? "a position encoding" : context_.scheme) + ": relative_rows";
  TORCH_CHECK(rows.value.defined() || !has_value_term(), who, ": a scheme with a value term must return value rows");
  check_relative_rows(rows, who, q.sizes(), k.size(2));
  return rows;
}

double PositionEncodingImpl::attention_scale() const {
  return 1.0 / std::sqrt(static_cast<double>(context_.head_dim()));
}

}  // namespace pelab
