#include "core/kernels/path_transport.h"

#include <algorithm>
#include <vector>

#include "core/kernels/row_math.h"  // and exp_nonpositive

namespace pelab::kernels {

namespace {

// out = H u = u - beta w (w . u), u left as it is
void reflect_into(float* out, const float* u, const float* w, float beta, int64_t n) {
  const float c = -beta * dot(w, u, n);
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) out[d] = u[d] + c * w[d];
}

// w . a and w . u in one pass
void two_dots(const float* w, const float* a, const float* u, int64_t n, float& wa, float& wu) {
  float sa = 0.0f, su = 0.0f;
#pragma omp simd reduction(+ : sa, su)
  for (int64_t d = 0; d < n; ++d) {
    sa += w[d] * a[d];
    su += w[d] * u[d];
  }
  wa = sa;
  wu = su;
}

// out += x a + y b in one pass
void add_two_scaled(float* out, const float* a, float x, const float* b, float y, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) out[d] += x * a[d] + y * b[d];
}

}  // namespace

// Rows are taken kRows at a time: their recurrences are independent, so the CPU overlaps the
// dot product -> update chains of one row with the others' (each chain alone waits on its
// reductions), and each key's k, w are loaded once for the group.
constexpr int64_t kRows = 4;

void path_transport_forward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                            MutableStrided products) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  std::vector<float> carried(kRows * Dh);  // row r: u of query first + r
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    const float* beta = in.beta.at(b, h, 0);
    for (int64_t first = 0; first < T; first += kRows) {
      const int64_t n = std::min(kRows, T - first);
      for (int64_t r = 0; r < n; ++r) {
        const float* q = in.q.at(b, h, first + r);
        for (int64_t d = 0; d < Dh; ++d) carried[r * Dh + d] = q[d];
      }
      for (int64_t j = first + n - 1; j >= 0; --j) {  // u = H_{j+1} ... H_i q_i
        const float* k = in.k.at(b, h, j);
        const float* w = in.w.at(b, h, j);
        for (int64_t r = std::max<int64_t>(j - first, 0); r < n; ++r) {  // the rows with j <= i
          float* u = carried.data() + r * Dh;
          const float* q = in.q.at(b, h, first + r);
          // scale (S_ij - q_i . k_j) (at j = i, u = q_i and the bias is 0) and w_j . u in one pass
          float transported = 0.0f, along = 0.0f;
#pragma omp simd reduction(+ : transported, along)
          for (int64_t d = 0; d < Dh; ++d) {
            transported += (u[d] - q[d]) * k[d];
            along += w[d] * u[d];
          }
          products.at(b, h, first + r)[j] = j == first + r ? 0.0f : in.scale * transported;
          if (j > 0) add_scaled(u, w, -beta[j] * along, Dh);  // u <- H_j u
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        float* row = products.at(b, h, first + r);
        for (int64_t j = first + r + 1; j < T; ++j) row[j] = 0.0f;
      }
    }
  }
}

void path_transport_backward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                             Strided grad_products, MutableStrided grad_q, MutableStrided grad_k,
                             MutableStrided grad_w, MutableStrided grad_beta) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  // carried[r]: row j holds u of query first + r at key j, H_{j+1} ... H_i q_i
  std::vector<float> carried(kRows * T * Dh);
  std::vector<float> adjoint(kRows * Dh);  // row r: dL/du at the key being undone
  std::vector<float> plain(kRows * Dh);    // row r: dL/dq_i through - q_i . k_j
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    const float* beta = in.beta.at(b, h, 0);
    float* dbeta = grad_beta.at(b, h, 0);
    for (int64_t t = 0; t < T; ++t) {
      dbeta[t] = 0.0f;
      for (int64_t d = 0; d < Dh; ++d) grad_k.at(b, h, t)[d] = grad_w.at(b, h, t)[d] = 0.0f;
    }
    for (int64_t first = 0; first < T; first += kRows) {
      const int64_t n = std::min(kRows, T - first);
      auto u_at = [&](int64_t r, int64_t j) { return carried.data() + (r * T + j) * Dh; };
      // the forward's u at every key, nearest first
      for (int64_t r = 0; r < n; ++r) {
        const float* q = in.q.at(b, h, first + r);
        for (int64_t d = 0; d < Dh; ++d) u_at(r, first + r)[d] = q[d];
      }
      for (int64_t j = first + n - 1; j > 0; --j) {
        const float* w = in.w.at(b, h, j);
        for (int64_t r = std::max<int64_t>(j - first, 0); r < n; ++r) reflect_into(u_at(r, j - 1), u_at(r, j), w, beta[j], Dh);
      }
      // in reverse, from the farthest key: at key j, undo u_(j-1) = H_j u_j, then S_ij = u_j . k_j
      for (int64_t d = 0; d < n * Dh; ++d) adjoint[d] = plain[d] = 0.0f;
      for (int64_t j = 0; j < first + n; ++j) {
        const float* k = in.k.at(b, h, j);
        const float* w = in.w.at(b, h, j);
        float* dk = grad_k.at(b, h, j);
        float* dw = grad_w.at(b, h, j);
        for (int64_t r = std::max<int64_t>(j - first, 0); r < n; ++r) {
          const float* uj = u_at(r, j);
          float* a = adjoint.data() + r * Dh;
          // the bias at j = i is 0 whatever q and k are
          const float g = j == first + r ? 0.0f : in.scale * grad_products.at(b, h, first + r)[j];
          if (j > 0) {  // a is dL/du_(j-1)
            float wa, wu;
            two_dots(w, a, uj, Dh, wa, wu);
            add_two_scaled(dw, a, -beta[j] * wu, uj, -beta[j] * wa, Dh);  // d/dw of -beta w (w . u)
            dbeta[j] -= wu * wa;
            add_two_scaled(a, w, -beta[j] * wa, k, g, Dh);  // H_j^T a = H_j a, then S_ij's part
          } else {
            add_scaled(a, k, g, Dh);
          }
          if (g == 0.0f) continue;
          add_two_scaled(dk, uj, g, in.q.at(b, h, first + r), -g, Dh);  // (u_j - q_i) g
          add_scaled(plain.data() + r * Dh, k, -g, Dh);                 // - q_i . k_j
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        float* dq = grad_q.at(b, h, first + r);
        for (int64_t d = 0; d < Dh; ++d) dq[d] = adjoint[r * Dh + d] + plain[r * Dh + d];
      }
    }
  }
}

void path_softmax_rows(float* logits, int64_t ld, int64_t first, int64_t count, int64_t zero_end, const float* mask,
                       int64_t mask_stride, float* lse) {
  for (int64_t i = first; i < first + count; ++i) {
    float* row = logits + i * ld;
    const int64_t keys = i + 1;
    if (mask) {
      const float* m = mask + i * mask_stride;
#pragma omp simd
      for (int64_t j = 0; j < keys; ++j) row[j] += m[j];
    }
    lse[i] = softmax_in_place(row, keys);
    std::fill(row + keys, row + std::max(keys, zero_end), 0.0f);
  }
}

void path_softmax_rows_backward(float* probabilities, float* grad, int64_t ld, int64_t first, int64_t count,
                                int64_t zero_end, const float* mask, int64_t mask_stride, const float* lse,
                                const float* delta) {
  for (int64_t i = first; i < first + count; ++i) {
    float *p = probabilities + i * ld, *g = grad + i * ld;
    const int64_t keys = i + 1;
    const float row_lse = lse[i], row_delta = delta[i];
    const float* m = mask ? mask + i * mask_stride : nullptr;
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) {
      p[j] = exp_nonpositive(p[j] + (m ? m[j] : 0.0f) - row_lse);
      g[j] = p[j] * (g[j] - row_delta);
    }
    std::fill(p + keys, p + std::max(keys, zero_end), 0.0f);
    std::fill(g + keys, g + std::max(keys, zero_end), 0.0f);
  }
}

}  // namespace pelab::kernels
