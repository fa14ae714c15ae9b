// DeBERTa's log bucket of one offset, torch-free (the kernel benchmark builds its runs with
// it); deberta_log_bucket (deberta.h) is the tensor form the scheme uses, and a test keeps
// the two equal.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace pelab {

// Why log buckets cannot be made with these settings (position_buckets, max_relative_positions),
// or "" when they can: 0 buckets means exact distances; 1 has none, and the reach must pass the
// exact ones.
inline std::string deberta_bucket_settings_problem(int64_t bucket_size, int64_t max_position) {
  if (bucket_size == 1) return "position_buckets must be 0 (exact distances) or at least 2, got 1";
  if (bucket_size > 0 && max_position <= bucket_size / 2 + 1)
    return "max_relative_positions (" + std::to_string(max_position) + ") must exceed position_buckets / 2 + 1 = " +
           std::to_string(bucket_size / 2 + 1);
  return "";
}

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
