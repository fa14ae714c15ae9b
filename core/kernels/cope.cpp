#include "core/kernels/cope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pelab::kernels {

namespace {

// One query row: the gates of every key, the table row r = p (+ L) of every key (clamped), and
// whether its count was inside the clamp.
struct Row {
  std::vector<float> gate, row;
  std::vector<char> inside;
  explicit Row(int64_t T) : gate(T), row(T), inside(T) {}
};

// The keys a row's bias is computed for: causal, those up to the query (the others are masked;
// their bias is e[0]'s product, as the reference's count 0 there); else every key.
int64_t keys_of_row(const CopeInputs& in, int64_t i, int64_t T) { return in.causal ? i + 1 : T; }

void compute_row(const CopeInputs& in, int64_t b, int64_t h, int64_t i, int64_t T, Row& r) {
  const float* z = in.logits.at(b, h, i);
  const int64_t keys = keys_of_row(in, i, T);
  for (int64_t t = 0; t < keys; ++t) r.gate[t] = 1.0f / (1.0f + std::exp(-z[t]));
  const float limit = static_cast<float>(in.limit), offset = in.causal ? 0.0f : limit;
  float sum = 0.0f;
  for (int64_t j = i; j >= 0; --j) {  // sum_{t=j..i} g_it
    sum += r.gate[j];
    r.inside[j] = sum <= limit;
    r.row[j] = std::min(sum, limit) + offset;
  }
  sum = 0.0f;
  for (int64_t j = i + 1; j < keys; ++j) {  // bidirectional only
    sum += r.gate[j] + (j == i + 1 ? r.gate[i] : 0.0f);  // sum_{t=i..j} g_it
    r.inside[j] = sum <= limit;
    r.row[j] = -std::min(sum, limit) + offset;
  }
}

}  // namespace

void cope_bias_forward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                       MutableStrided bias) {
  const int64_t T = dims.queries;
  Row r(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      compute_row(in, b, h, i, T, r);
      const float* products = in.products.at(b, h, i);
      float* out = bias.at(b, h, i);
      const int64_t keys = keys_of_row(in, i, T);
      for (int64_t j = 0; j < keys; ++j) {
        const float lower = std::floor(r.row[j]), weight = r.row[j] - lower;
        const auto floor_row = static_cast<int64_t>(lower), ceil_row = static_cast<int64_t>(std::ceil(r.row[j]));
        out[j] = products[ceil_row] * weight + products[floor_row] * (1.0f - weight);
      }
      for (int64_t j = keys; j < T; ++j) out[j] = products[0];  // causal: masked keys
    }
  }
}

void cope_bias_backward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                        Strided grad_bias, MutableStrided grad_logits, MutableStrided grad_products) {
  const int64_t T = dims.queries;
  Row r(T);
  std::vector<float> grad_count(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      compute_row(in, b, h, i, T, r);
      const float* g = grad_bias.at(b, h, i);
      const float* products = in.products.at(b, h, i);
      float* dproducts = grad_products.at(b, h, i);
      for (int64_t c = 0; c < in.rows; ++c) dproducts[c] = 0.0f;
      const int64_t keys = keys_of_row(in, i, T);
      for (int64_t j = keys; j < T; ++j) dproducts[0] += g[j];  // causal: the masked keys' e[0]
      for (int64_t j = 0; j < keys; ++j) {
        const float lower = std::floor(r.row[j]), weight = r.row[j] - lower;
        const auto floor_row = static_cast<int64_t>(lower), ceil_row = static_cast<int64_t>(std::ceil(r.row[j]));
        dproducts[ceil_row] += g[j] * weight;
        dproducts[floor_row] += g[j] * (1.0f - weight);
        // d bias / d count = the two products' difference (the weight's slope), unless clamped
        const float slope = products[ceil_row] - products[floor_row];
        grad_count[j] = r.inside[j] ? g[j] * slope * (j > i ? -1.0f : 1.0f) : 0.0f;  // j > i: count = -sum
      }
      // counts to gates: key t <= i is in the sums of j = 0 .. t; key t > i in those of j >= t;
      // the query's own key in every one; then through the sigmoid
      float* dz = grad_logits.at(b, h, i);
      float running = 0.0f;
      for (int64_t t = 0; t <= i; ++t) {
        running += grad_count[t];
        dz[t] = running;
      }
      for (int64_t t = i + 1; t < T; ++t) dz[t] = 0.0f;
      if (!in.causal) {
        running = 0.0f;
        for (int64_t t = T - 1; t > i; --t) {
          running += grad_count[t];
          dz[t] = running;
        }
        dz[i] += running;
      }
      for (int64_t t = 0; t < keys; ++t) dz[t] *= r.gate[t] * (1.0f - r.gate[t]);
    }
  }
}

}  // namespace pelab::kernels
