// The optional fast path of a relative scheme: its terms as tables with one row per offset,
// which the fused CPU attention (core/model/fused_attention.h) adds row by row instead of
// calling score_bias / value_term for (B, H, T, T) tensors. A scheme that does not override
// PositionEncodingImpl::relative_rows loses nothing but speed; docs/adding-a-scheme.md says
// when it is worth writing.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace pelab {

// Tables with one row per offset query - key, for contiguous positions 0 .. T - 1 (offsets
// -(T - 1) .. T - 1 ascending), (2T - 1, Dh) shared by the heads or (H, 2T - 1, Dh);
// undefined tables add nothing. With s = attention_scale():
//   scores[i, j] = s (q_i . k_j + q'_i . query[i - j] + k_j . key[i - j]) + bias[i, j] + mask
//   out_i = sum_j p_ij (v_j + value[i - j])
// q' is offset_query ((B, H, T, Dh); undefined: q itself), bias (B|1, H|1, T|1, T) what is
// left of the scheme's score bias (undefined: none).
// Two compact forms, which check_relative_rows enforces:
// - clip > 0 (Shaw): the query and value tables have 2 clip + 1 rows, for the offsets
//   -clip .. clip, farther offsets using the end rows; the key table is never clipped.
// - runs (not with clip): the (2T - 1) int64 row of each offset (ascending), from 0 in steps
//   of 0 or 1; every table then has runs[-1] + 1 rows, one per run of neighbouring offsets
//   that share a row (DeBERTa's log buckets), and the kernel computes each run's products once.
struct RelativeRows {
  torch::Tensor query, key, value;
  torch::Tensor offset_query;
  torch::Tensor bias;
  int64_t clip = 0;
  torch::Tensor runs;
  bool defined() const { return query.defined() || key.defined() || value.defined(); }
};

// Throws (c10::Error) when `rows` break a rule above for queries and keys shaped like
// q_sizes (B, H, Tq, Dh) and keys_count Tk; the message starts with `who` (the scheme).
void check_relative_rows(const RelativeRows& rows, const std::string& who, torch::IntArrayRef q_sizes,
                         int64_t keys_count);

}  // namespace pelab
