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

torch::Tensor empty_heads_last(const torch::Tensor& like) {
  return torch::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options()).transpose(1, 2);
}

double PositionEncodingImpl::attention_scale() const {
  return 1.0 / std::sqrt(static_cast<double>(context_.head_dim()));
}

}  // namespace pelab
