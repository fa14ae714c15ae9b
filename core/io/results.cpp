#include "core/io/results.h"

namespace pelab {

std::vector<EvalResult> merge_evaluation_rows(std::vector<EvalResult> rows, const std::vector<EvalResult>& added) {
  for (const auto& row : added) {
    bool replaced = false;
    for (auto& existing : rows)
      if (existing.same_settings(row)) {
        existing = row;
        replaced = true;
        break;
      }
    if (!replaced) rows.push_back(row);
  }
  return rows;
}

}  // namespace pelab
