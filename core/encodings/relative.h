// Shared machinery of relative schemes. pelab's internal sign convention is
//   offset = query position - key position      (> 0 when the key is in the past),
// as HF BERT relative_*, DeBERTa and Transformer-XL; schemes whose reference counts
// key - query (Shaw/tensor2tensor, T5) negate it, and say so in their header.
//
// No scheme materializes (T, T, Dh) relative embeddings. A relative table is indexed by an
// int64 (B'|1, Tq, Tk) index; only the window of rows that index uses (at most 2T-1 for
// contiguous positions) is touched: q is multiplied with those rows once, (B, H, Tq, R),
// and the result gathered into (B, H, Tq, Tk).
#pragma once

#include <torch/torch.h>

#include "core/encodings/position_encoding.h"

namespace pelab {

// Offsets (B'|1, Tq, Tk) int64, query - key. B' = 1 when every row of the positions is the
// same (contiguous positions, or one randomized draw per batch), so the work is done once.
torch::Tensor relative_offsets(const Positions& positions);

// The rows [first, first + rows) of a table that `index` uses, and `index - first`.
struct IndexWindow {
  torch::Tensor local;  // (B'|1, Tq, Tk) int64 in [0, rows)
  int64_t first = 0;
  int64_t rows = 0;
};
IndexWindow index_window(const torch::Tensor& index);

// scores[b, h, i, j] = x[b, h, i, :] . rows[(h,) local[b', i, j], :]
// x: (B, H, Tq, Dh); rows: (R, Dh) shared by heads or (H, R, Dh); local: (B'|1, Tq, Tk) -> (B, H, Tq, Tk)
torch::Tensor gather_scores(const torch::Tensor& x, const torch::Tensor& rows, const torch::Tensor& local);

// The key-side twin: scores[b, h, i, j] = x[b, h, j, :] . rows[(h,) local[b', i, j], :]
// x: (B, H, Tk, Dh) (keys) -> (B, H, Tq, Tk)
torch::Tensor gather_key_scores(const torch::Tensor& x, const torch::Tensor& rows, const torch::Tensor& local);

// out[b, h, i, :] = sum_j probs[b, h, i, j] rows[local[b', i, j], :]
// probs: (B, H, Tq, Tk); rows: (R, Dh); local: (B'|1, Tq, Tk) -> (B, H, Tq, Dh)
torch::Tensor scatter_values(const torch::Tensor& probs, const torch::Tensor& rows, const torch::Tensor& local);

// bias[b', h, i, j] = per_row[h, local[b', i, j]]; per_row: (H, R) -> (B'|1, H, Tq, Tk)
torch::Tensor gather_bias(const torch::Tensor& per_row, const torch::Tensor& local);

}  // namespace pelab
