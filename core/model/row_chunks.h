// Parallel loops over the rows of a (rows, cols) float array in fixed chunks, with column
// sums kept per chunk and added in chunk order: sums (a bias's or a norm's parameter
// gradients) that do not depend on the number of threads. Used by gelu.cpp and
// layer_norm.cpp.
#pragma once

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

namespace pelab {

// Elements per parallel chunk: 64 KB of floats.
constexpr int64_t kChunkElements = 16384;

// Rows per chunk: about kChunkElements elements.
inline int64_t rows_per_chunk(int64_t cols) {
  return std::max<int64_t>(1, kChunkElements / std::max<int64_t>(cols, 1));
}

inline int64_t row_chunk_count(int64_t rows, int64_t cols) {
  const int64_t step = rows_per_chunk(cols);
  return (rows + step - 1) / step;
}

// f(chunk, first_row, row_count) for every chunk, in parallel.
template <class Function>
void for_each_row_chunk(int64_t rows, int64_t cols, const Function& f) {
  const int64_t step = rows_per_chunk(cols);
  at::parallel_for(0, row_chunk_count(rows, cols), 1, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) f(chunk, chunk * step, std::min(step, rows - chunk * step));
  });
}

// partial_sums (chunks, cols), float32 contiguous -> (cols): its rows added in order.
inline torch::Tensor sum_of_chunk_rows(const torch::Tensor& partial_sums) {
  const int64_t chunks = partial_sums.size(0), cols = partial_sums.size(1);
  auto total = torch::zeros({cols}, partial_sums.options());
  const float* partial = partial_sums.data_ptr<float>();
  float* out = total.data_ptr<float>();
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    for (int64_t c = 0; c < cols; ++c) out[c] += partial[chunk * cols + c];
  return total;
}

}  // namespace pelab
