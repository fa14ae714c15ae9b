#include "core/kernels/cope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pelab::kernels {

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

void add_scaled(float* out, const float* x, float scale, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) out[d] += scale * x[d];
}

// One query row: the gates of every key, the table row r = p (+ L) of every key (clamped), and
// whether its count was inside the clamp; products[c] = q_i . e[c].
struct Row {
  std::vector<float> gate, row, products;
  std::vector<char> inside;
  explicit Row(int64_t T, int64_t rows) : gate(T), row(T), products(rows), inside(T) {}
};

void compute_row(const CopeInputs& in, int64_t b, int64_t h, int64_t i, int64_t T, int64_t Dh, Row& r) {
  const float* q = in.q.at(b, h, i);
  for (int64_t t = 0; t < T; ++t) r.gate[t] = 1.0f / (1.0f + std::exp(-in.scale * dot(q, in.k.at(b, h, t), Dh)));
  const float limit = static_cast<float>(in.limit), offset = in.causal ? 0.0f : limit;
  float sum = 0.0f;
  for (int64_t j = i; j >= 0; --j) {  // sum_{t=j..i} g_it
    sum += r.gate[j];
    r.inside[j] = sum <= limit;
    r.row[j] = std::min(sum, limit) + offset;
  }
  sum = 0.0f;
  for (int64_t j = i + 1; j < T; ++j) {
    if (in.causal) {  // masked: the reference's count is 0
      r.inside[j] = 0;
      r.row[j] = 0.0f;
      continue;
    }
    sum += r.gate[j] + (j == i + 1 ? r.gate[i] : 0.0f);  // sum_{t=i..j} g_it
    r.inside[j] = sum <= limit;
    r.row[j] = -std::min(sum, limit) + offset;
  }
  for (int64_t c = 0; c < in.rows; ++c) r.products[c] = dot(q, in.table + c * Dh, Dh);
}

}  // namespace

void cope_bias_forward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                       MutableStrided bias) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  Row r(T, in.rows);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      compute_row(in, b, h, i, T, Dh, r);
      float* out = bias.at(b, h, i);
      for (int64_t j = 0; j < T; ++j) {
        const float lower = std::floor(r.row[j]), weight = r.row[j] - lower;
        const auto floor_row = static_cast<int64_t>(lower), ceil_row = static_cast<int64_t>(std::ceil(r.row[j]));
        out[j] = r.products[ceil_row] * weight + r.products[floor_row] * (1.0f - weight);
      }
    }
  }
}

void cope_bias_backward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                        Strided grad_bias, MutableStrided grad_q, MutableStrided grad_k, float* grad_table) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  Row r(T, in.rows);
  std::vector<float> grad_products(in.rows), grad_count(T), grad_gate(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < Dh; ++d) grad_k.at(b, h, t)[d] = 0.0f;
    for (int64_t i = 0; i < T; ++i) {
      compute_row(in, b, h, i, T, Dh, r);
      const float* g = grad_bias.at(b, h, i);
      std::fill(grad_products.begin(), grad_products.end(), 0.0f);
      for (int64_t j = 0; j < T; ++j) {
        const float lower = std::floor(r.row[j]), weight = r.row[j] - lower;
        const auto floor_row = static_cast<int64_t>(lower), ceil_row = static_cast<int64_t>(std::ceil(r.row[j]));
        grad_products[ceil_row] += g[j] * weight;
        grad_products[floor_row] += g[j] * (1.0f - weight);
        // d bias / d count = the two products' difference (the weight's slope), unless clamped
        const float slope = r.products[ceil_row] - r.products[floor_row];
        grad_count[j] = r.inside[j] ? g[j] * slope * (j > i ? -1.0f : 1.0f) : 0.0f;  // j > i: count = -sum
      }
      // counts to gates: key t <= i is in the sums of j = 0 .. t; key t >= i in those of j >= max(t, i + 1)
      std::fill(grad_gate.begin(), grad_gate.end(), 0.0f);
      float running = 0.0f;
      for (int64_t t = 0; t <= i; ++t) {
        running += grad_count[t];
        grad_gate[t] += running;
      }
      if (!in.causal) {
        running = 0.0f;
        for (int64_t t = T - 1; t > i; --t) {
          running += grad_count[t];
          grad_gate[t] += running;
        }
        grad_gate[i] += running;  // g_ii is in every sum for j > i
      }
      const float* q = in.q.at(b, h, i);
      float* dq = grad_q.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) dq[d] = 0.0f;
      for (int64_t t = 0; t < T; ++t) {
        if (grad_gate[t] == 0.0f) continue;
        const float dz = in.scale * grad_gate[t] * r.gate[t] * (1.0f - r.gate[t]);
        add_scaled(dq, in.k.at(b, h, t), dz, Dh);
        add_scaled(grad_k.at(b, h, t), q, dz, Dh);
      }
      for (int64_t c = 0; c < in.rows; ++c) {
        if (grad_products[c] == 0.0f) continue;
        add_scaled(dq, in.table + c * Dh, grad_products[c], Dh);
        add_scaled(grad_table + c * Dh, q, grad_products[c], Dh);
      }
    }
  }
}

}  // namespace pelab::kernels
