// Attention dropout's keep-or-drop decisions, shared by the fused CPU kernel
// (core/kernels/attention.cpp) and the unfused path (core/model/attention.cpp), so that both
// drop the same probabilities. Element (row, j) of one attention call, where row = pair * Tq
// + i for the (batch, head) pair b * H + h and query i, is dropped when a counter-based hash
// of (key, row, j) is below threshold = p 2^32. The key is drawn once per call from the run's
// generator, so a run is reproducible and a resumed run (the generator is checkpointed)
// draws the same keys; the backward needs nothing stored: the fused kernel keeps each
// decision in the sign bit of the probability it saves. Torch-free.
#pragma once

#include <cmath>
#include <cstdint>

namespace pelab::kernels {

struct AttentionDropout {
  uint64_t key = 0;         // this call's: every decision derives from it
  uint32_t threshold = 0;   // dropped when the hash < threshold; 0: nothing is dropped
  float keep_scale = 1.0f;  // 1 / (1 - p): kept probabilities are scaled by it
  bool active() const { return threshold != 0; }
};

// Dropout at rate p in [0, 1) for one call's key: the drop probability is threshold / 2^32,
// p to within 2^-33. p = 0 (or below 2^-33) drops nothing.
inline AttentionDropout attention_dropout(double p, uint64_t key) {
  AttentionDropout d;
  if (!(p > 0.0)) return d;
  const double threshold = std::nearbyint(p * 4294967296.0);
  d.key = key;
  d.threshold = threshold >= 4294967295.0 ? 4294967295u : static_cast<uint32_t>(threshold);
  d.keep_scale = static_cast<float>(1.0 / (1.0 - p));
  return d;
}

// The 32-bit seed of one row's decisions: SplitMix64's finalizer of the key and the row.
inline uint32_t dropout_row_seed(uint64_t key, int64_t row) {
  uint64_t z = key + (static_cast<uint64_t>(row) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

// The hash of column j given its row's seed, for one uint32 or a GCC vector of them (lanes
// j, j + 1, ...): Wellons' lowbias32 of seed + j * 0x9E3779B9 (a bijection with full
// avalanche; 32-bit multiplies, so that the kernel computes it a vector of columns at once).
template <class U>
__attribute__((always_inline)) inline U dropout_hash(uint32_t seed, U column) {
  U x = seed + column * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// Whether element (row, j) of a call is kept.
inline bool dropout_keeps(const AttentionDropout& d, int64_t row, int64_t j) {
  return dropout_hash<uint32_t>(dropout_row_seed(d.key, row), static_cast<uint32_t>(j)) >= d.threshold;
}

}  // namespace pelab::kernels
