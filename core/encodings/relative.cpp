#include "core/encodings/relative.h"

namespace pelab {

torch::Tensor relative_offsets(const Positions& positions) {
  auto q = positions.query, k = positions.key;
  // A broadcast row (stride 0, as contiguous_positions makes) or a single row: compute once.
  if (q.size(0) == 1 || (q.stride(0) == 0 && k.stride(0) == 0)) {
    q = q.narrow(0, 0, 1);
    k = k.narrow(0, 0, 1);
  }
  return q.unsqueeze(-1) - k.unsqueeze(-2);  // (B'|1, Tq, Tk)
}

IndexWindow index_window(const torch::Tensor& index) {
  auto bounds = torch::stack({index.min(), index.max()}).cpu();
  IndexWindow w;
  w.first = bounds[0].item<int64_t>();
  w.rows = bounds[1].item<int64_t>() - w.first + 1;
  w.local = index - w.first;
  return w;
}

namespace {
// (B'|1, Tq, Tk) -> (B, H, Tq, Tk) view for gather/scatter along the last dimension.
torch::Tensor expand_index(const torch::Tensor& local, int64_t batch, int64_t heads) {
  return local.unsqueeze(1).expand({batch, heads, local.size(1), local.size(2)});
}
}  // namespace

torch::Tensor gather_scores(const torch::Tensor& x, const torch::Tensor& rows, const torch::Tensor& local) {
  // x . rows^T for every row the window holds: (B, H, Tq, R)
  auto all_rows = torch::matmul(x, rows.transpose(-2, -1));
  return all_rows.gather(-1, expand_index(local, x.size(0), x.size(1)));
}

torch::Tensor gather_key_scores(const torch::Tensor& x, const torch::Tensor& rows, const torch::Tensor& local) {
  // the key at j meets the row of (i, j): gather with the transposed index, then transpose back
  return gather_scores(x, rows, local.transpose(-2, -1)).transpose(-2, -1);
}

torch::Tensor scatter_values(const torch::Tensor& probs, const torch::Tensor& rows, const torch::Tensor& local) {
  const int64_t B = probs.size(0), H = probs.size(1), Tq = probs.size(2), R = rows.size(0);
  // mass each query puts on each table row: (B, H, Tq, R)
  auto mass = torch::zeros({B, H, Tq, R}, probs.options()).scatter_add(-1, expand_index(local, B, H), probs);
  return torch::matmul(mass, rows);  // (B, H, Tq, Dh)
}

torch::Tensor gather_bias(const torch::Tensor& per_row, const torch::Tensor& local) {
  const int64_t H = per_row.size(0);
  auto picked = per_row.index_select(1, local.reshape(-1));  // (H, B' Tq Tk)
  return picked.view({H, local.size(0), local.size(1), local.size(2)}).permute({1, 0, 2, 3});
}

}  // namespace pelab
