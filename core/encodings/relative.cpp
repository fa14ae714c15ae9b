#include "core/encodings/relative.h"

namespace pelab {

namespace {

// Positions whose rows are all the same row (a broadcast view, or a single row): that row.
torch::Tensor shared_row(const torch::Tensor& p) {
  if (p.size(0) == 1 || p.stride(0) == 0) return p[0];
  return {};
}

// (B'|1, Tq, Tk) -> (B, H, Tq, Tk) view for gather/scatter along the last dimension.
torch::Tensor expand_index(const torch::Tensor& local, int64_t batch, int64_t heads) {
  return local.unsqueeze(1).expand({batch, heads, local.size(1), local.size(2)});
}

// S: (B, H, T, W = 2T - 1) with column c for offset (T - 1) - c (offsets descending) ->
// (B, H, T, T) view with [i, j] = S[i, column of offset i - j], at flat address
// i W + (T - 1) - i + j = (T - 1) + i (W - 1) + j: one strided view, whose backward is a
// single scatter of the gradient (a chain of reshape/narrow views, the Transformer-XL
// trick, costs two; measured 1.5x slower for relative_key at T = 512).
torch::Tensor relative_shift(const torch::Tensor& S, int64_t T) {
  auto s = S.contiguous();
  const int64_t W = s.size(-1);
  return s.as_strided({s.size(0), s.size(1), T, T}, {s.stride(0), s.stride(1), W - 1, 1},
                      s.storage_offset() + T - 1);
}

}  // namespace

torch::Tensor relative_offsets(const Positions& positions) {
  auto q = positions.query, k = positions.key;
  if (q.size(0) == 1 || (q.stride(0) == 0 && k.stride(0) == 0)) {
    q = q.narrow(0, 0, 1);
    k = k.narrow(0, 0, 1);
  }
  return q.unsqueeze(-1) - k.unsqueeze(-2);  // (B'|1, Tq, Tk)
}

RelativeGeometry::RelativeGeometry(const Positions& positions) {
  const auto q = shared_row(positions.query), k = shared_row(positions.key);
  const int64_t T = positions.query.size(1);
  auto options = torch::TensorOptions().dtype(torch::kInt64).device(positions.query.device());
  if (q.defined() && k.defined() && T == positions.key.size(1) && T > 0) {
    auto steps = torch::arange(T, options);
    contiguous_ = q.equal(k) && (q - q[0]).equal(steps);
  }
  if (contiguous_) {
    length_ = T;
    offsets_ = torch::arange(-(T - 1), T, options);
    return;
  }
  auto all = relative_offsets(positions);
  auto bounds = torch::stack({all.min(), all.max()}).cpu();
  const int64_t lo = bounds[0].item<int64_t>(), hi = bounds[1].item<int64_t>();
  offsets_ = torch::arange(lo, hi + 1, options);
  local_ = all - lo;
}

torch::Tensor RelativeGeometry::query_scores(const torch::Tensor& x, const torch::Tensor& rows) const {
  if (contiguous_) {  // rows in descending offset order, then the relative shift
    auto scores = torch::matmul(x, rows.flip(-2).transpose(-2, -1));  // (B, H, T, W)
    return relative_shift(scores, length_);
  }
  auto scores = torch::matmul(x, rows.transpose(-2, -1));  // (B, H, Tq, W)
  return scores.gather(-1, expand_index(local_, x.size(0), x.size(1)));
}

torch::Tensor RelativeGeometry::key_scores(const torch::Tensor& x, const torch::Tensor& rows) const {
  if (contiguous_) {
    // key j meets offset i - j: in key-major order that is the query case with offsets
    // j - i, i.e. the rows in ascending offset order; transpose back to (query, key)
    auto scores = torch::matmul(x, rows.transpose(-2, -1));  // (B, H, Tk, W)
    return relative_shift(scores, length_).transpose(-2, -1);
  }
  auto scores = torch::matmul(x, rows.transpose(-2, -1));  // (B, H, Tk, W)
  return scores.gather(-1, expand_index(local_.transpose(-2, -1), x.size(0), x.size(1))).transpose(-2, -1);
}

torch::Tensor RelativeGeometry::weighted_rows(const torch::Tensor& probs, const torch::Tensor& rows) const {
  const int64_t B = probs.size(0), H = probs.size(1), Tq = probs.size(2), W = rows.size(0);
  if (contiguous_) {
    // the transpose of the relative shift: lay probs into their (query, offset) cells
    auto mass = torch::zeros({B, H, Tq, W}, probs.options());
    relative_shift(mass, length_).copy_(probs);
    return torch::matmul(mass, rows.flip(0));  // (B, H, Tq, Dh)
  }
  auto mass = torch::zeros({B, H, Tq, W}, probs.options()).scatter_add(-1, expand_index(local_, B, H), probs);
  return torch::matmul(mass, rows);
}

torch::Tensor RelativeGeometry::bias(const torch::Tensor& per_offset) const {
  const int64_t H = per_offset.size(0);
  if (contiguous_) {
    // window i of the ascending row holds offsets i - (T - 1) ... i: read it backwards
    auto windows = per_offset.unfold(-1, length_, 1);  // (H, T, T): [i, t] = offset i + t - (T - 1)
    return windows.flip(-1).unsqueeze(0);               // [i, j] = offset i - j
  }
  auto picked = per_offset.index_select(1, local_.reshape(-1));  // (H, B' Tq Tk)
  return picked.view({H, local_.size(0), local_.size(1), local_.size(2)}).permute({1, 0, 2, 3});
}

}  // namespace pelab
