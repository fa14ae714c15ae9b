#include "core/encodings/position_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/encodings/host_to_device.h"

namespace pelab {

PositionSampler::PositionSampler(const PositionsConfig& config)
    : name_(config.sampler),
      max_length_(config.max_length),
      global_shift_(config.global_shift),
      local_shift_(config.local_shift),
      global_scaling_(config.global_scaling) {}

int64_t PositionSampler::position_range(int64_t length) const {
  if (name_ == "contiguous") return length;
  if (name_ == "cape") return static_cast<int64_t>(std::ceil((length + global_shift_ + local_shift_) * global_scaling_));
  return max_length_;
}

std::vector<double> PositionSampler::random_floats(int64_t count, double range, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, range);
  std::vector<double> values(count);
  for (auto& v : values) v = uniform(rng);
  std::sort(values.begin(), values.end());
  return values;
}

Positions PositionSampler::sample_for_evaluation(int64_t batch, int64_t length, std::mt19937_64& rng,
                                                 torch::Device device) const {
  if (training_only()) return contiguous_positions(batch, length, device);
  return sample(batch, length, rng, device);
}

std::vector<int64_t> PositionSampler::randomized(int64_t count, int64_t range, std::mt19937_64& rng) {
  TORCH_CHECK(count <= range, "randomized positions: ", count, " tokens cannot get distinct positions from [0, ",
              range, "); raise positions.max_length");
  // a partial Fisher-Yates shuffle of 0 .. range - 1, then sorted
  std::vector<int64_t> pool(range);
  std::iota(pool.begin(), pool.end(), 0);
  for (int64_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, range - 1);
    std::swap(pool[i], pool[pick(rng)]);
  }
  pool.resize(count);
  std::sort(pool.begin(), pool.end());
  return pool;
}

Positions PositionSampler::sample(int64_t batch, int64_t length, std::mt19937_64& rng, torch::Device device) const {
  if (name_ == "contiguous") return contiguous_positions(batch, length, device);
  if (name_ == "random_float")
    return shared_row_positions(torch::tensor(random_floats(length, double(max_length_), rng), torch::kFloat64), batch,
                                device);
  if (name_ == "cape") {
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    const double shift = global_shift_ * unit(rng), scale = std::exp(std::log(global_scaling_) * unit(rng));
    std::vector<double> row(length);
    for (int64_t p = 0; p < length; ++p) row[p] = (double(p) + shift + local_shift_ * unit(rng)) * scale;
    return shared_row_positions(torch::tensor(row, torch::kFloat64), batch, device);
  }
  TORCH_CHECK(length <= max_length_, "positions.max_length = ", max_length_, " is shorter than a sequence of ",
              length, " tokens");
  torch::Tensor row;
  if (name_ == "random_offset") {
    std::uniform_int_distribution<int64_t> start(0, max_length_ - length);
    row = torch::arange(length, torch::kInt64) + start(rng);
  } else {
    row = torch::tensor(randomized(length, max_length_, rng), torch::kInt64);
  }
  return shared_row_positions(row, batch, device, max_length_);
}

}  // namespace pelab
