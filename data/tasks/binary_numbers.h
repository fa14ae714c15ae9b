// Little-endian binary numbers as bit vectors (bit i = 2^i), for the arithmetic tasks at any
// length (no machine-word limit).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace pelab::bits {

using Bits = std::vector<int64_t>;  // 0/1, least significant first

// Uniform in [1, 2^width - 1]: `width` random bits, redrawn while all zero.
Bits random_nonzero(int64_t width, std::mt19937_64& rng);
Bits add(const Bits& a, const Bits& b);
Bits multiply(const Bits& a, const Bits& b);
Bits floor_sqrt(const Bits& n);
// Without the most significant zeros (zero is {0}); and zero-padded to `width`.
Bits trimmed(Bits a);
Bits padded(Bits a, int64_t width);

}  // namespace pelab::bits
