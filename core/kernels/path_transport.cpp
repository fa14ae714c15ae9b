#include "core/kernels/path_transport.h"

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

// u <- H u = u - beta w (w . u)
void reflect(float* u, const float* w, float beta, int64_t n) { add_scaled(u, w, -beta * dot(w, u, n), n); }

}  // namespace

void path_transport_forward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                            MutableStrided products) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  std::vector<float> u(Dh);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    const float* beta = in.beta.at(b, h, 0);
    for (int64_t i = 0; i < T; ++i) {
      float* row = products.at(b, h, i);
      const float* q = in.q.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) u[d] = q[d];
      for (int64_t j = i; j >= 0; --j) {  // u = H_{j+1} ... H_i q_i
        row[j] = dot(u.data(), in.k.at(b, h, j), Dh);
        if (j > 0) reflect(u.data(), in.w.at(b, h, j), beta[j], Dh);
      }
      for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
    }
  }
}

void path_transport_backward(const AttentionDims& dims, int64_t begin, int64_t end, const PathInputs& in,
                             Strided grad_products, MutableStrided grad_q, MutableStrided grad_k,
                             MutableStrided grad_w, MutableStrided grad_beta) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  std::vector<float> carried(T * Dh);  // row j: u at key j, H_{j+1} ... H_i q_i
  std::vector<float> adjoint(Dh);      // dL/du at the key being undone
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    const float* beta = in.beta.at(b, h, 0);
    float* dbeta = grad_beta.at(b, h, 0);
    for (int64_t t = 0; t < T; ++t) {
      dbeta[t] = 0.0f;
      for (int64_t d = 0; d < Dh; ++d) grad_k.at(b, h, t)[d] = grad_w.at(b, h, t)[d] = 0.0f;
    }
    for (int64_t i = 0; i < T; ++i) {
      const float* g = grad_products.at(b, h, i);
      // the forward's u at every key, nearest first
      float* u = carried.data() + i * Dh;
      const float* q = in.q.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) u[d] = q[d];
      for (int64_t j = i; j > 0; --j) {
        float* next = carried.data() + (j - 1) * Dh;
        for (int64_t d = 0; d < Dh; ++d) next[d] = carried[j * Dh + d];
        reflect(next, in.w.at(b, h, j), beta[j], Dh);
      }
      // in reverse, from the farthest key: at key j, undo u_(j-1) = H_j u_j, then S_ij = u_j . k_j
      for (int64_t d = 0; d < Dh; ++d) adjoint[d] = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        const float* uj = carried.data() + j * Dh;
        if (j > 0) {  // the adjoint so far is dL/du_(j-1)
          const float* w = in.w.at(b, h, j);
          const float wa = dot(w, adjoint.data(), Dh), wu = dot(w, uj, Dh);
          float* dw = grad_w.at(b, h, j);
          add_scaled(dw, adjoint.data(), -beta[j] * wu, Dh);  // d/dw of -beta w (w . u)
          add_scaled(dw, uj, -beta[j] * wa, Dh);
          dbeta[j] -= wu * wa;
          add_scaled(adjoint.data(), w, -beta[j] * wa, Dh);  // H_j^T a = H_j a
        }
        add_scaled(adjoint.data(), in.k.at(b, h, j), g[j], Dh);
        add_scaled(grad_k.at(b, h, j), uj, g[j], Dh);
      }
      float* dq = grad_q.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) dq[d] = adjoint[d];
    }
  }
}

}  // namespace pelab::kernels
