// DeBERTa's log bucket of one offset, torch-free (the kernel benchmark builds its runs with
// it); deberta_log_bucket (deberta.h) is the tensor form the scheme uses, and a test keeps
// the two equal.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace pelab {

// make_log_bucket_position for one relative position: exact up to bucket_size / 2 either
// way, then logarithmic, reaching bucket_size / 2 - 1 more buckets at max_position.
inline int64_t deberta_log_bucket_of(int64_t relative, int64_t bucket_size, int64_t max_position) {
  const int64_t mid = bucket_size / 2, distance = std::abs(relative);
  if (distance <= mid) return relative;
  const double log_position =
      std::ceil(std::log(double(distance) / mid) / std::log(double(max_position - 1) / mid) * (mid - 1)) + mid;
  return relative > 0 ? static_cast<int64_t>(log_position) : -static_cast<int64_t>(log_position);
}

}  // namespace pelab
