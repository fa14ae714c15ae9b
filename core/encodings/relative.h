// Shared machinery of relative schemes. pelab's internal sign convention is
//   offset = query position - key position      (> 0 when the key is in the past),
// as HF BERT relative_*, DeBERTa and Transformer-XL; schemes whose reference counts
// key - query (Shaw/tensor2tensor, T5) negate it, and say so in their header.
//
// No scheme materializes (T, T, Dh) relative embeddings. A scheme turns the W distinct
// offsets of an attention call (2T - 1 for contiguous positions) into W rows (embeddings or
// per-head biases); RelativeGeometry multiplies q with those rows once, (B, H, Tq, W), and
// maps the result onto (B, H, Tq, Tk):
//   - contiguous positions (p, p+1, ..., the same for query and key, shared by the batch):
//     a strided view (the Transformer-XL "relative shift"), no index tensor at all;
//   - any other positions (randomized, shifted per row): a gather by the (B'|1, Tq, Tk) index;
//   - positions with many distinct offsets (W > 2 Tk: randomized positions have up to Tq Tk):
//     each (query, key) pair's row, (B'|1, H|1, Tq, Tk, Dh), and Tk products per query
//     instead of W (for T = 80 and W = 6,320 the (B, H, Tq, W) products and their gradient
//     are 80x larger than the (B, H, Tq, Tk) scores).
// The W offsets of positions that are not contiguous are the distinct ones that occur, found
// on the device (a read-back: on a GPU the step waits for it and cannot be a CUDA graph), or,
// on a GPU when the positions' maker bounds them (PositionFacts::offset_bound, a randomized
// sampler's range), every offset in [-bound, bound], so nothing is read back.
#pragma once

#include <torch/torch.h>

#include "core/encodings/position_encoding.h"

namespace pelab {

// Offsets (B'|1, Tq, Tk) int64, query - key. B' = 1 when every row of the positions is the
// same (contiguous positions, or one randomized draw per batch), so the work is done once.
torch::Tensor relative_offsets(const Positions& positions);

// Where the offsets of positions that are not contiguous come from.
enum class OffsetSearch {
  automatic,  // bounded on a GPU when the facts bound the offsets (to kMaxBoundedOffsets), else distinct
  distinct,   // the distinct offsets that occur (a read-back)
  bounded,    // every offset in [-offset_bound, offset_bound]; an error when the facts give no bound
};

// Within its scope, this thread's RelativeGeometry objects take `search` where they were asked
// for the automatic one (tests: the GPU's bounded search, on the CPU).
class OffsetSearchScope {
 public:
  explicit OffsetSearchScope(OffsetSearch search);
  ~OffsetSearchScope();
  OffsetSearchScope(const OffsetSearchScope&) = delete;
  OffsetSearchScope& operator=(const OffsetSearchScope&) = delete;

 private:
  OffsetSearch previous_;
};

class RelativeGeometry {
 public:
  // The most offsets the bounded search takes (a range of 8,192 positions): beyond it the rows
  // of every offset would outweigh the read-back they spare.
  static constexpr int64_t kMaxBoundedOffsets = 16383;

  explicit RelativeGeometry(const Positions& positions, OffsetSearch search = OffsetSearch::automatic);

  // The offsets (query - key) of this call, ascending: (W) int64 (float64 for real
  // positions); for contiguous positions every offset in [-(T-1), T-1], for the bounded search
  // every offset in [-bound, bound], else the distinct ones that occur.
  const torch::Tensor& offsets() const { return offsets_; }
  bool contiguous() const { return contiguous_; }
  bool per_pair() const { return per_pair_; }  // products per (query, key) pair, not per offset

  // x_i . rows[o(i, j)]: x (B, H, Tq, Dh); rows (W, Dh) shared by heads or (H, W, Dh), row c
  // belonging to offsets()[c] -> (B, H, Tq, Tk)
  torch::Tensor query_scores(const torch::Tensor& x, const torch::Tensor& rows) const;
  // x_j . rows[o(i, j)]: x (B, H, Tk, Dh) (keys) -> (B, H, Tq, Tk)
  torch::Tensor key_scores(const torch::Tensor& x, const torch::Tensor& rows) const;
  // sum_j probs[i, j] rows[o(i, j)]: probs (B, H, Tq, Tk); rows (W, Dh) -> (B, H, Tq, Dh)
  torch::Tensor weighted_rows(const torch::Tensor& probs, const torch::Tensor& rows) const;
  // per_offset[h, o(i, j)]: per_offset (H, W) -> (B'|1, H, Tq, Tk)
  torch::Tensor bias(const torch::Tensor& per_offset) const;

 private:
  bool contiguous_ = false;
  bool per_pair_ = false;
  int64_t length_ = 0;   // T (contiguous case)
  torch::Tensor offsets_;  // (W)
  torch::Tensor local_;    // (B'|1, Tq, Tk) index into offsets_ (general case)
};

// What OffsetSearch::automatic becomes for positions that are not contiguous: bounded on a GPU
// when the maker bounds the offsets (offset_bound >= 0) by at most kMaxBoundedOffsets rows,
// else distinct (the CPU: nothing to gain from sparing a read-back). The bounded rows of a
// randomized sampler (2 max_length - 1, more than 2 Tk when max_length > Tk) take the per-pair
// products.
OffsetSearch automatic_offset_search(int64_t offset_bound, bool on_gpu);

// The search RelativeGeometry(positions) takes if they are not contiguous: this thread's
// OffsetSearchScope, else automatic_offset_search of their facts' bound.
OffsetSearch offset_search_for(const Positions& positions);

}  // namespace pelab
