#include "core/kernels/cope.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/row_math.h"     // softmax_in_place
#include "core/kernels/vector_math.h"  // exp_nonpositive

namespace pelab::kernels {

namespace {

// One query row's counts. Gates are positive, so a count only grows with the distance: past the
// first key whose count exceeds L, every farther key is clamped too (table row L, or -L after
// the query, and no gradient through its gates). The row is computed out to those keys only:
// near_first .. far_end - 1 hold counts below the clamp (gate, row valid there); keys before
// near_first are clamped at row L + offset, keys from far_end at row offset - L.
struct Row {
  std::vector<float> gate, row;
  int64_t near_first = 0, far_end = 0;
  float offset = 0.0f, limit = 0.0f;
  explicit Row(int64_t T) : gate(T), row(T) {}
  float near_row() const { return limit + offset; }  // the clamped keys' table rows
  float far_row() const { return offset - limit; }
};

// The keys a row's bias is computed for: causal, those up to the query (the others are masked;
// their bias is e[0]'s product, as the reference's count 0 there); else every key.
int64_t keys_of_row(bool causal, int64_t i, int64_t T) { return causal ? i + 1 : T; }

// sigmoid(z) by an exp of a nonpositive number only (branch-free)
inline float sigmoid(float z) {
  const float e = exp_nonpositive(-std::fabs(z));
  return (z >= 0.0f ? 1.0f : e) / (1.0f + e);
}

// Query row i's gates (from its logits z[0 .. keys)) and counts, out to the clamp.
void count_row(const float* z, int64_t i, int64_t keys, int64_t limit_rows, bool causal, Row& r) {
  r.limit = static_cast<float>(limit_rows);
  r.offset = causal ? 0.0f : r.limit;
  float sum = 0.0f;
  int64_t j = i;
  for (; j >= 0; --j) {  // sum_{t=j..i} g_it
    r.gate[j] = sigmoid(z[j]);
    sum += r.gate[j];
    if (sum > r.limit) break;
    r.row[j] = sum + r.offset;
  }
  r.near_first = j + 1;
  sum = r.gate[i];
  for (j = i + 1; j < keys; ++j) {  // bidirectional only: sum_{t=i..j} g_it
    r.gate[j] = sigmoid(z[j]);
    sum += r.gate[j];
    if (sum > r.limit) break;
    r.row[j] = r.offset - sum;
  }
  r.far_end = j;
}

// A fractional table row: the two integer rows around it and the upper one's weight.
struct Between {
  int64_t lower, upper;
  float weight;
};
inline Between between(float row) {
  const float lower = std::floor(row);
  return {static_cast<int64_t>(lower), static_cast<int64_t>(std::ceil(row)), row - lower};
}

// bias_ij from the row's products P_i.
inline float bias_at(const float* products, float row) {
  const Between at = between(row);
  return products[at.upper] * at.weight + products[at.lower] * (1.0f - at.weight);
}

// out[j] = add[j] + bias_ij for the keys [0, keys) of row r (out may be add), or bias_ij
// without add.
void row_bias(const float* products, const Row& r, int64_t keys, const float* add, float* out) {
  const float near = products[static_cast<int64_t>(r.near_row())], far = products[static_cast<int64_t>(r.far_row())];
  auto addend = [&](int64_t j) { return add ? add[j] : 0.0f; };
  for (int64_t j = 0; j < r.near_first; ++j) out[j] = addend(j) + near;
  for (int64_t j = r.near_first; j < r.far_end; ++j) out[j] = addend(j) + bias_at(products, r.row[j]);
  for (int64_t j = r.far_end; j < keys; ++j) out[j] = addend(j) + far;
}

// Row scratch of the backward: the counts' gradient and z's gradient through them.
struct RowGradients {
  std::vector<float> count, logits;
  explicit RowGradients(int64_t T) : count(T), logits(T) {}
};

float sum_of(const float* x, int64_t begin, int64_t end) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = begin; j < end; ++j) sum += x[j];
  return sum;
}

// The backward of query row i's bias over keys [0, keys): g = d/d bias_ij; grad_products:
// (rows) written; scratch.logits[near_first .. far_end): the gradient of z_ij through the
// counts (0 elsewhere, not written).
void count_row_backward(const float* g, const float* products, const Row& r, int64_t i, int64_t keys, int64_t rows,
                        float* grad_products, RowGradients& scratch) {
  for (int64_t c = 0; c < rows; ++c) grad_products[c] = 0.0f;
  grad_products[static_cast<int64_t>(r.near_row())] += sum_of(g, 0, r.near_first);
  grad_products[static_cast<int64_t>(r.far_row())] += sum_of(g, r.far_end, keys);
  float* grad_count = scratch.count.data();
  for (int64_t j = r.near_first; j < r.far_end; ++j) {
    const Between at = between(r.row[j]);
    grad_products[at.upper] += g[j] * at.weight;
    grad_products[at.lower] += g[j] * (1.0f - at.weight);
    // d bias / d count = the two products' difference (the weight's slope)
    const float slope = products[at.upper] - products[at.lower];
    grad_count[j] = g[j] * slope * (j > i ? -1.0f : 1.0f);  // j > i: count = -sum
  }
  // counts to gates: key t <= i is in the sums of j = 0 .. t; key t > i in those of j >= t;
  // the query's own key in every one; then through the sigmoid
  float* dz = scratch.logits.data();
  float running = 0.0f;
  for (int64_t t = r.near_first; t <= i; ++t) {
    running += grad_count[t];
    dz[t] = running;
  }
  running = 0.0f;
  for (int64_t t = r.far_end - 1; t > i; --t) {  // bidirectional only
    running += grad_count[t];
    dz[t] = running;
  }
  dz[i] += running;
  const float* gate = r.gate.data();
#pragma omp simd
  for (int64_t t = r.near_first; t < r.far_end; ++t) dz[t] *= gate[t] * (1.0f - gate[t]);
}

}  // namespace

void cope_bias_forward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                       MutableStrided bias) {
  const int64_t T = dims.queries;
  Row r(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t keys = keys_of_row(in.causal, i, T);
      count_row(in.logits.at(b, h, i), i, keys, in.limit, in.causal, r);
      const float* products = in.products.at(b, h, i);
      float* out = bias.at(b, h, i);
      row_bias(products, r, keys, nullptr, out);
      for (int64_t j = keys; j < T; ++j) out[j] = products[0];  // causal: masked keys
    }
  }
}

void cope_bias_backward(const AttentionDims& dims, int64_t begin, int64_t end, const CopeInputs& in,
                        Strided grad_bias, MutableStrided grad_logits, MutableStrided grad_products) {
  const int64_t T = dims.queries;
  Row r(T);
  RowGradients scratch(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t keys = keys_of_row(in.causal, i, T);
      count_row(in.logits.at(b, h, i), i, keys, in.limit, in.causal, r);
      const float* g = grad_bias.at(b, h, i);
      float* dproducts = grad_products.at(b, h, i);
      count_row_backward(g, in.products.at(b, h, i), r, i, keys, in.rows, dproducts, scratch);
      for (int64_t j = keys; j < T; ++j) dproducts[0] += g[j];  // causal: the masked keys' e[0]
      float* dz = grad_logits.at(b, h, i);
      std::fill(dz, dz + T, 0.0f);
      std::copy(scratch.logits.begin() + r.near_first, scratch.logits.begin() + r.far_end, dz + r.near_first);
    }
  }
}

namespace {

// Row c of a block: its scores s_j = z_j + bias_j + mask_j over its keys, into `scores`.
// Returns the row's key count.
int64_t row_scores(const CopeRowBlock& block, int64_t c, const float* z, Row& r, float* scores) {
  const int64_t i = block.first + c, keys = keys_of_row(block.causal, i, block.queries);
  count_row(z, i, keys, block.limit, block.causal, r);
  row_bias(block.products + c * block.rows, r, keys, z, scores);
  if (block.mask) {
    const float* mask = block.mask + c * block.mask_stride;
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) scores[j] += mask[j];
  }
  return keys;
}

}  // namespace

void cope_attention_rows_forward(const CopeRowBlock& block, float* z, int64_t stride, float* lse) {
  Row r(block.queries);
  const int64_t width = block.width();
  for (int64_t c = 0; c < block.count; ++c) {
    float* row = z + c * stride;
    const int64_t keys = row_scores(block, c, row, r, row);  // in place: z_j is read before s_j is written
    std::fill(row + keys, row + width, 0.0f);
    lse[c] = softmax_in_place(row, keys);
  }
}

void cope_attention_rows_backward(const CopeRowBlock& block, const float* z, float* dp, int64_t stride,
                                  const float* lse, const float* delta, float* probabilities, float* grad_products) {
  Row r(block.queries);
  RowGradients scratch(block.queries);
  const int64_t width = block.width();
  for (int64_t c = 0; c < block.count; ++c) {
    float* a = probabilities + c * stride;
    float* grad = dp + c * stride;
    const int64_t keys = row_scores(block, c, z + c * stride, r, a);
    const float row_lse = lse[c], row_delta = delta[c];
    // a_j = exp(s_j - lse); d s_j = a_j (dout . v_j - dout . out), which is also d bias_j
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) {
      a[j] = exp_nonpositive(a[j] - row_lse);
      grad[j] = a[j] * (grad[j] - row_delta);
    }
    std::fill(a + keys, a + width, 0.0f);
    std::fill(grad + keys, grad + width, 0.0f);
    const int64_t i = block.first + c;
    count_row_backward(grad, block.products + c * block.rows, r, i, keys, block.rows, grad_products + c * block.rows,
                       scratch);
    const float* through_counts = scratch.logits.data();
#pragma omp simd
    for (int64_t j = r.near_first; j < r.far_end; ++j) grad[j] += through_counts[j];
  }
}

}  // namespace pelab::kernels
