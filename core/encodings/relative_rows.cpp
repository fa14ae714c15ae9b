#include "core/encodings/relative_rows.h"

namespace pelab {

namespace {

// A table (W, Dh) shared by the heads or (H, W, Dh); `w_name` says what W is.
void check_table(const torch::Tensor& t, const std::string& who, const char* what, int64_t H, int64_t W,
                 const char* w_name, int64_t Dh) {
  if (!t.defined() || t.numel() == 0) return;
  const bool shared = t.dim() == 2, per_head = t.dim() == 3 && t.size(0) == H;
  TORCH_CHECK((shared || per_head) && t.size(-2) == W && t.size(-1) == Dh, who, ": ", what, " rows must be (", w_name,
              ", Dh) = (", W, ", ", Dh, ") or (H, ", w_name, ", Dh) = (", H, ", ", W, ", ", Dh, "), got ", t.sizes());
}

// The number of runs (table rows) of `runs` (2T - 1 ascending offsets' rows); 0: no runs.
int64_t checked_run_count(const torch::Tensor& runs, const std::string& who, int64_t W, int64_t clip) {
  if (!runs.defined() || runs.numel() == 0) return 0;
  TORCH_CHECK(clip == 0, who, ": runs do not combine with clip");
  TORCH_CHECK(runs.dim() == 1 && runs.size(0) == W && !runs.is_floating_point(), who, ": runs must be (2T - 1) = (", W,
              ") integers, got ", runs.sizes(), " ", runs.dtype());
  const auto ascending = runs.to(torch::kInt64);
  const auto steps = ascending.slice(0, 1) - ascending.slice(0, 0, W - 1);
  TORCH_CHECK(ascending[0].item<int64_t>() == 0 && ((steps == 0) | (steps == 1)).all().item<bool>(), who,
              ": runs must start at 0 and step by 0 or 1 from one offset to the next");
  return ascending[W - 1].item<int64_t>() + 1;
}

}  // namespace

void check_relative_rows(const RelativeRows& rows, const std::string& who, torch::IntArrayRef q_sizes,
                         int64_t keys_count) {
  TORCH_CHECK(q_sizes.size() == 4, who, ": q must be (B, H, T, Dh), got ", q_sizes);
  const int64_t H = q_sizes[1], Tq = q_sizes[2], Dh = q_sizes[3], T = keys_count;
  TORCH_CHECK(rows.clip >= 0, who, ": clip must be >= 0, got ", rows.clip);
  const std::pair<const torch::Tensor*, const char*> tables[] = {
      {&rows.query, "query"}, {&rows.key, "key"}, {&rows.value, "value"}};
  for (const auto& [table, what] : tables)
    TORCH_CHECK(!table->defined() || table->numel() == 0 || Tq == T, who, ": relative ", what,
                " rows need as many queries as keys, got ", Tq, " and ", T);
  const int64_t runs = checked_run_count(rows.runs, who, 2 * T - 1, rows.clip);
  TORCH_CHECK(runs == 0 || Tq == T, who, ": runs need as many queries as keys, got ", Tq, " and ", T);
  for (const auto& [table, what] : tables) {
    const bool clipped = rows.clip > 0 && table != &rows.key;  // the key table is never clipped
    check_table(*table, who, what, H, runs > 0 ? runs : clipped ? 2 * rows.clip + 1 : 2 * T - 1,
                runs > 0 ? "runs[-1] + 1" : clipped ? "2 clip + 1" : "2T - 1", Dh);
  }
  const auto& offset_query = rows.offset_query;
  TORCH_CHECK(!offset_query.defined() || offset_query.numel() == 0 || offset_query.sizes() == q_sizes, who,
              ": the offset query must be shaped like q ", q_sizes, ", got ", offset_query.sizes());
}

}  // namespace pelab
