#include "core/encodings/relative.h"

namespace pelab {

namespace {

// (B'|1, Tq, Tk) -> (B, H, Tq, Tk) view for gather/scatter along the last dimension.
torch::Tensor expand_index(const torch::Tensor& local, int64_t batch, int64_t heads) {
  return local.unsqueeze(1).expand({batch, heads, local.size(1), local.size(2)});
}

// S: (B, H, b, W = b + T - 1), the products of b consecutive queries i0 .. i0 + b - 1 with
// the rows of offsets i0 + b - 1 down to i0 - (T - 1) (descending) -> (B, H, b, T) view with
// [r, j] = S[r, column of offset (i0 + r) - j], at flat address
// r W + (b - 1) - r + j = (b - 1) + r (W - 1) + j: one strided view, whose backward is a
// single scatter of the gradient (a chain of reshape/narrow views, the Transformer-XL
// trick, costs two and more memory).
torch::Tensor relative_shift(const torch::Tensor& S, int64_t b, int64_t T) {
  auto s = S.contiguous();
  const int64_t W = s.size(-1);
  return s.as_strided({s.size(0), s.size(1), b, T}, {s.stride(0), s.stride(1), W - 1, 1},
                      s.storage_offset() + b - 1);
}

// Queries are processed in blocks: a block of b queries needs only b + T - 1 offsets, so
// the products cost T (T + b) instead of T (2T - 1) (at b = T/8, 1.125 T^2: about what
// q k^T costs), and their memory shrinks alike.
int64_t block_size(int64_t T) { return T >= 256 ? (T + 7) / 8 : T; }

// The rows of the offsets a block [i0, i0 + b) needs, from rows in descending offset order
// (row c = offset T - 1 - c): offsets i0 + b - 1 down to i0 - (T - 1).
torch::Tensor block_rows(const torch::Tensor& descending, int64_t i0, int64_t b, int64_t T) {
  return descending.narrow(-2, T - i0 - b, b + T - 1);
}

// Calls f(i0, b) for every block and concatenates the results along dimension 2 (a cat:
// copying each block into a preallocated output instead makes autograd clone the whole
// gradient once per block).
template <typename F>
torch::Tensor by_query_blocks(int64_t T, F&& f) {
  const int64_t b = block_size(T);
  if (b >= T) return f(0, T);
  std::vector<torch::Tensor> parts;
  for (int64_t i0 = 0; i0 < T; i0 += b) parts.push_back(f(i0, std::min(b, T - i0)));
  return torch::cat(parts, 2);
}

// The row of each (query, key) pair: rows (W, Dh) shared by heads or (H, W, Dh); index
// (B'|1, Tq, Tk) into W -> (B'|1, H|1, Tq, Tk, Dh)
torch::Tensor rows_per_pair(const torch::Tensor& rows, const torch::Tensor& index) {
  const int64_t heads = rows.dim() == 3 ? rows.size(0) : 1;
  auto picked = rows.index_select(-2, index.reshape(-1));  // (H|., B' Tq Tk, Dh)
  return picked.view({heads, index.size(0), index.size(1), index.size(2), rows.size(-1)}).transpose(0, 1);
}

// a (B, H, Tq, K) times each query's rows of pair (B'|1, H|1, Tq, Tk, Dh) -> (B, H, Tq, N):
// transpose_pair (scores): K = Dh, times pair[.., i]^T (Dh, Tk), N = Tk; otherwise
// (weighted rows): K = Tk, times pair[.., i] (Tk, Dh), N = Dh. With one geometry for the
// batch (B' = 1) the products are batched over (head, query) with the batch as the rows of
// each, so the pair rows are never copied per batch row.
torch::Tensor pair_products(const torch::Tensor& a, const torch::Tensor& pair, bool transpose_pair) {
  const auto right = transpose_pair ? pair.transpose(-2, -1) : pair;  // (.., Tq, K, N)
  if (pair.size(0) == 1)
    return torch::matmul(a.permute({1, 2, 0, 3}), right[0]).permute({2, 0, 1, 3});  // (H, Tq, B, N) -> (B, H, Tq, N)
  return torch::matmul(a.unsqueeze(-2), right).squeeze(-2);                        // (B, H, Tq, 1, N)
}

}  // namespace

torch::Tensor relative_offsets(const Positions& positions) {
  auto q = collapse_broadcast_rows(positions.query), k = collapse_broadcast_rows(positions.key);
  return q.unsqueeze(-1) - k.unsqueeze(-2);  // (B'|1, Tq, Tk); B' = 1 when both are one row
}

namespace {
thread_local OffsetSearch scoped_search = OffsetSearch::automatic;

int64_t known_offset_bound(const Positions& positions) {  // -1: unknown
  const PositionFacts* facts = positions.known_facts();
  return facts && !real_positions(positions) ? facts->offset_bound : -1;
}
}  // namespace

OffsetSearchScope::OffsetSearchScope(OffsetSearch search) : previous_(scoped_search) { scoped_search = search; }
OffsetSearchScope::~OffsetSearchScope() { scoped_search = previous_; }

RelativeGeometry::RelativeGeometry(const Positions& positions, OffsetSearch search) {
  const auto q = collapse_broadcast_rows(positions.query), k = collapse_broadcast_rows(positions.key);
  const int64_t T = positions.query.size(1);
  auto options = torch::TensorOptions().dtype(torch::kInt64).device(positions.query.device());
  const PositionFacts* facts = positions.known_facts();
  if (facts) {  // nothing read back from the device
    contiguous_ = facts->contiguous && T > 0;
  } else if (!real_positions(positions) && q.size(0) == 1 && k.size(0) == 1 && T == positions.key.size(1) && T > 0) {
    auto steps = torch::arange(T, options);
    contiguous_ = q[0].equal(k[0]) && (q[0] - q[0][0]).equal(steps);
  }
  if (contiguous_) {
    length_ = T;
    offsets_ = torch::arange(-(T - 1), T, options);
    return;
  }
  const int64_t bound = known_offset_bound(positions);
  if (search == OffsetSearch::automatic) search = offset_search_for(positions);
  if (search == OffsetSearch::bounded) {  // every offset the maker can produce: nothing read back
    TORCH_CHECK(bound >= 0, "RelativeGeometry: the bounded offset search needs positions whose maker bounds them "
                "(PositionFacts::offset_bound)");
    offsets_ = torch::arange(-bound, bound + 1, options);
    local_ = relative_offsets(positions) + bound;
  } else {
    // Only the offsets that occur: randomized positions drawn from [0, L) have at most T^2
    // distinct offsets however large L is.
    auto unique = at::_unique2(relative_offsets(positions), /*sorted=*/true, /*return_inverse=*/true,
                               /*return_counts=*/false);
    offsets_ = std::get<0>(unique);
    local_ = std::get<1>(unique);
  }
  // per offset, the products cost W per query; per pair Tk, in smaller GEMMs: a margin of 2
  per_pair_ = offsets_.size(0) > 2 * positions.key.size(1);
}

OffsetSearch automatic_offset_search(int64_t offset_bound, bool on_gpu) {
  const bool bounded = on_gpu && offset_bound >= 0 && 2 * offset_bound + 1 <= RelativeGeometry::kMaxBoundedOffsets;
  return bounded ? OffsetSearch::bounded : OffsetSearch::distinct;
}

OffsetSearch offset_search_for(const Positions& positions) {
  if (scoped_search != OffsetSearch::automatic) return scoped_search;
  return automatic_offset_search(known_offset_bound(positions), positions.query.is_cuda());
}

torch::Tensor RelativeGeometry::query_scores(const torch::Tensor& x, const torch::Tensor& rows) const {
  if (contiguous_) {  // rows in descending offset order, then the relative shift
    const auto descending = rows.flip(-2);
    return by_query_blocks(length_, [&](int64_t i0, int64_t b) {
      auto scores = torch::matmul(x.narrow(2, i0, b), block_rows(descending, i0, b, length_).transpose(-2, -1));
      return relative_shift(scores, b, length_);  // (B, H, b, T)
    });
  }
  if (per_pair_) return pair_products(x, rows_per_pair(rows, local_), /*transpose_pair=*/true);
  auto scores = torch::matmul(x, rows.transpose(-2, -1));  // (B, H, Tq, W)
  return scores.gather(-1, expand_index(local_, x.size(0), x.size(1)));
}

torch::Tensor RelativeGeometry::key_scores(const torch::Tensor& x, const torch::Tensor& rows) const {
  if (contiguous_) {
    // key j meets offset i - j: in key-major order that is the query case with offsets
    // j - i, i.e. the rows in ascending offset order; transpose back to (query, key)
    return by_query_blocks(length_, [&](int64_t j0, int64_t b) {
      auto scores = torch::matmul(x.narrow(2, j0, b), block_rows(rows, j0, b, length_).transpose(-2, -1));
      return relative_shift(scores, b, length_);  // (B, H, b keys, T queries)
    }).transpose(-2, -1);
  }
  const auto key_major = local_.transpose(-2, -1);  // (B'|1, Tk, Tq)
  if (per_pair_) return pair_products(x, rows_per_pair(rows, key_major), /*transpose_pair=*/true).transpose(-2, -1);
  auto scores = torch::matmul(x, rows.transpose(-2, -1));  // (B, H, Tk, W)
  return scores.gather(-1, expand_index(key_major, x.size(0), x.size(1))).transpose(-2, -1);
}

torch::Tensor RelativeGeometry::weighted_rows(const torch::Tensor& probs, const torch::Tensor& rows) const {
  const int64_t B = probs.size(0), H = probs.size(1), Tq = probs.size(2), W = rows.size(0);
  if (contiguous_) {
    // the transpose of the relative shift: lay probs into their (query, offset) cells
    const auto descending = rows.flip(0);
    return by_query_blocks(length_, [&](int64_t i0, int64_t b) {
      auto mass = torch::zeros({B, H, b, b + length_ - 1}, probs.options());
      relative_shift(mass, b, length_).copy_(probs.narrow(2, i0, b));
      return torch::matmul(mass, block_rows(descending, i0, b, length_));  // (B, H, b, Dh)
    });
  }
  if (per_pair_) return pair_products(probs, rows_per_pair(rows, local_), /*transpose_pair=*/false);
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
