#include "data/tasks/binary_numbers.h"

#include <algorithm>

namespace pelab::bits {

Bits random_nonzero(int64_t width, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> bit(0, 1);
  Bits out(width);
  do {
    for (auto& b : out) b = bit(rng);
  } while (std::all_of(out.begin(), out.end(), [](int64_t b) { return b == 0; }));
  return out;
}

Bits trimmed(Bits a) {
  while (a.size() > 1 && a.back() == 0) a.pop_back();
  if (a.empty()) a.push_back(0);
  return a;
}

Bits padded(Bits a, int64_t width) {
  a.resize(std::max<int64_t>(width, a.size()), 0);
  return a;
}

Bits add(const Bits& a, const Bits& b) {
  Bits out;
  int64_t carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    const int64_t sum = carry + (i < a.size() ? a[i] : 0) + (i < b.size() ? b[i] : 0);
    out.push_back(sum & 1);
    carry = sum >> 1;
  }
  return trimmed(out);
}

Bits multiply(const Bits& a, const Bits& b) {
  Bits out = {0};
  for (size_t i = 0; i < b.size(); ++i) {
    if (!b[i]) continue;
    Bits shifted(i, 0);
    shifted.insert(shifted.end(), a.begin(), a.end());
    out = add(out, shifted);
  }
  return trimmed(out);
}

namespace {
int compare(const Bits& a, const Bits& b) {  // both trimmed
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = a.size(); i-- > 0;)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}
}  // namespace

Bits floor_sqrt(const Bits& n) {
  // the binary digit-by-digit method: try each bit of the root from the top
  Bits root = {0};
  const int64_t top = (static_cast<int64_t>(trimmed(n).size()) + 1) / 2;
  Bits target = trimmed(n);
  for (int64_t i = top - 1; i >= 0; --i) {
    Bits candidate = padded(root, i + 1);
    candidate[i] = 1;
    candidate = trimmed(candidate);
    if (compare(multiply(candidate, candidate), target) <= 0) root = candidate;
  }
  return trimmed(root);
}

}  // namespace pelab::bits
