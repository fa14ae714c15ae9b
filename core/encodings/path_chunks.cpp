#include "core/encodings/path_chunks.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernels/path_transport.h"  // the softmax rows

namespace pelab::path_chunks {

namespace {

// Fortran BLAS's sgemm, as LibTorch's CPU library links it (Debian: OpenBLAS, whose OpenMP
// build runs single-threaded inside at::parallel_for's threads)
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

Sgemm blas_sgemm() {
  static const Sgemm found = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "sgemm_"));
  return found;
}

// Row-major c (m x n, row stride ldc) = alpha op(a) op(b) + beta c, op(a): m x k, op(b): k x n
// (a stored k x m when transposed). beta 0: c is not read.
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (const Sgemm sgemm = blas_sgemm()) {
    // column-major, as BLAS reads it: c^T (n x m) = op(b)^T op(a)^T
    const char ta = transpose_b ? 'T' : 'N', tb = transpose_a ? 'T' : 'N';
    const int M = static_cast<int>(n), N = static_cast<int>(m), K = static_cast<int>(k);
    const int LDA = static_cast<int>(ldb), LDB = static_cast<int>(lda), LDC = static_cast<int>(ldc);
    sgemm(&ta, &tb, &M, &N, &K, &alpha, b, &LDA, a, &LDB, &beta, c, &LDC);
    return;
  }
  at::NoGradGuard no_grad;
  auto view = [](const float* data, int64_t rows, int64_t columns, int64_t stride, bool transposed) {
    const auto matrix = torch::from_blob(const_cast<float*>(data), {transposed ? columns : rows, transposed ? rows : columns},
                                         {stride, 1}, torch::kFloat32);
    return transposed ? matrix.t() : matrix;
  };
  auto out = torch::from_blob(c, {m, n}, {ldc, 1}, torch::kFloat32);
  const auto product = torch::mm(view(a, m, k, lda, transpose_a), view(b, k, n, ldb, transpose_b));
  if (beta == 0.0f) out.copy_(product.mul_(alpha));
  else out.mul_(beta).add_(product, alpha);
}

// What a pair's transported scores S go into: the bias scale (S - q k^T) that attention adds to
// its own scores, or the logits scale S of PaTH's own attention
enum class Scores { kBias, kLogits };

// One pair's sizes: T tokens in n chunks of C (the last padded to C), head size Dh
struct Sizes {
  int64_t T, Dh, C, n;
  int64_t padded() const { return n * C; }
  int64_t solved() const { return C + Dh; }  // the columns of [U | Wt]
};

// One pair's inputs (padded with w = 0, beta = 0: H = I after the last token) and what its
// chunks hold, in one scratch allocation per thread
struct Pair {
  Sizes z;
  std::vector<float> storage;
  float *q, *k, *w, *beta;  // (Tp, Dh), (Tp)
  float* lower;             // (n, C, C): tril(q w^T), the diagonal included
  float* solved;            // (n, C, C + Dh): [U | Wt]
  float* keys;              // (Tp, Dh): scale * k^ per chunk
  float* queries;           // (Tp, Dh): q~ per chunk
  float* transport;         // (n, Dh, Dh): P per chunk
  float* square;            // (C, C) scratch
  float *current, *next;    // (Tp, Dh) each: scores' rotating Y_c when it keeps none

  explicit Pair(const Sizes& sizes) : z(sizes) {
    const int64_t Tp = z.padded(), C = z.C, Dh = z.Dh;
    storage.resize(7 * Tp * Dh + Tp + z.n * C * C + z.n * C * z.solved() + z.n * Dh * Dh + C * C);
    float* cursor = storage.data();
    auto take = [&](int64_t count) {
      float* start = cursor;
      cursor += count;
      return start;
    };
    q = take(Tp * Dh), k = take(Tp * Dh), w = take(Tp * Dh), beta = take(Tp);
    lower = take(z.n * C * C), solved = take(z.n * C * z.solved());
    keys = take(Tp * Dh), queries = take(Tp * Dh), transport = take(z.n * Dh * Dh), square = take(C * C);
    current = take(Tp * Dh), next = take(Tp * Dh);
  }

  // copies pair `p`'s rows (contiguous (B * H, T, Dh) and (B * H, T) inputs), zero padding
  void load(int64_t p, const float* q_all, const float* k_all, const float* w_all, const float* beta_all) {
    const int64_t T = z.T, Dh = z.Dh, pad = (z.padded() - T) * Dh;
    std::memcpy(q, q_all + p * T * Dh, T * Dh * sizeof(float));
    std::memcpy(k, k_all + p * T * Dh, T * Dh * sizeof(float));
    std::memcpy(w, w_all + p * T * Dh, T * Dh * sizeof(float));
    std::memcpy(beta, beta_all + p * T, T * sizeof(float));
    std::fill(q + T * Dh, q + T * Dh + pad, 0.0f);
    std::fill(k + T * Dh, k + T * Dh + pad, 0.0f);
    std::fill(w + T * Dh, w + T * Dh + pad, 0.0f);
    std::fill(beta + T, beta + z.padded(), 0.0f);
  }

  float* lower_of(int64_t c) const { return lower + c * z.C * z.C; }
  float* solved_of(int64_t c) const { return solved + c * z.C * z.solved(); }
  float* transport_of(int64_t c) const { return transport + c * z.Dh * z.Dh; }
  float* row(float* rows, int64_t c) const { return rows + c * z.C * z.Dh; }  // chunk c's first row

  // Chunk c's UT transform and what follows from it; with `out` (row stride T), its diagonal
  // block written: the bias -scale tril(q w^T) U (0 on and above the diagonal, and zeros to the
  // right of the block), or the logits scale (q k^T - tril(q w^T) U) (on and below the diagonal)
  void transform(int64_t c, float scale, Scores what, float* out) {
    const int64_t C = z.C, Dh = z.Dh, S = z.solved(), s = c * C;
    const float *Q = row(q, c), *K = row(k, c), *W = row(w, c), *b = beta + s;
    float *M = lower_of(c), *X = solved_of(c);
    gemm(false, true, C, C, Dh, 1.0f, Q, Dh, W, Dh, 0.0f, M, C);  // q_i . w_t
    for (int64_t i = 0; i < C; ++i) std::fill(M + i * C + i + 1, M + (i + 1) * C, 0.0f);
    // right-hand sides beta_t (w_t . k_j) for j < t, and beta_t w_t
    gemm(false, true, C, C, Dh, 1.0f, W, Dh, K, Dh, 0.0f, X, S);
    for (int64_t t = 0; t < C; ++t) {
      float* x = X + t * S;
      for (int64_t j = 0; j < C; ++j) x[j] = j < t ? b[t] * x[j] : 0.0f;
      for (int64_t d = 0; d < Dh; ++d) x[C + d] = b[t] * W[t * Dh + d];
    }
    // (I + beta tril(W W^T, -1)) X = rhs, row by row from the first
    gemm(false, true, C, C, Dh, 1.0f, W, Dh, W, Dh, 0.0f, square, C);
    for (int64_t t = 1; t < C; ++t) {
      float* x = X + t * S;
      for (int64_t u = 0; u < t; ++u) {
        const float a = b[t] * square[t * C + u];
        const float* y = X + u * S;
#pragma omp simd
        for (int64_t m = 0; m < S; ++m) x[m] -= a * y[m];
      }
    }
    const float *U = X, *Wt = X + C;
    float *keys_c = row(keys, c), *queries_c = row(queries, c), *P = transport_of(c);
    for (int64_t e = 0; e < C * Dh; ++e) keys_c[e] = scale * K[e];
    gemm(true, false, C, Dh, C, -scale, U, S, W, Dh, 1.0f, keys_c, Dh);  // scale (k - U^T w)
    std::memcpy(queries_c, Q, C * Dh * sizeof(float));
    gemm(false, false, C, Dh, C, -1.0f, M, C, Wt, S, 1.0f, queries_c, Dh);  // q - tril(q w^T) Wt
    for (int64_t e = 0; e < Dh * Dh; ++e) P[e] = e % (Dh + 1) == 0 ? 1.0f : 0.0f;
    gemm(true, false, Dh, Dh, C, -1.0f, W, Dh, Wt, S, 1.0f, P, Dh);  // I - w^T Wt
    if (!out) return;
    const int64_t valid = std::min(C, z.T - s);
    float* block = out + s * z.T + s;
    if (what == Scores::kLogits) {
      gemm(false, true, valid, valid, Dh, scale, Q, Dh, K, Dh, 0.0f, block, z.T);
      gemm(false, false, valid, valid, valid, -scale, M, C, U, S, 1.0f, block, z.T);
    } else {
      gemm(false, false, valid, valid, valid, -scale, M, C, U, S, 0.0f, block, z.T);
      for (int64_t i = s; i < s + valid; ++i) std::fill(out + i * z.T + s + valid, out + (i + 1) * z.T, 0.0f);
    }
  }

  // Y_c = [q~ of chunk c + 1; Y_(c+1) P_(c+1)] into `next` from `current` (rows of Y_(c+1), or none)
  void carry(int64_t c, const float* current, int64_t current_rows, float* next) const {
    const int64_t C = z.C, Dh = z.Dh;
    std::memcpy(next, row(queries, c + 1), C * Dh * sizeof(float));
    gemm(false, false, current_rows, Dh, Dh, 1.0f, current, Dh, transport_of(c + 1), Dh, 0.0f, next + C * Dh, Dh);
  }

  // Key chunk c against the queries of every later chunk (Y_c: their carried rows): the logits
  // Y_c k^_c^T, less scale q k^T for the bias, into `out` (row stride T)
  void between(int64_t c, const float* Y, float scale, Scores what, float* out) const {
    if (!out) return;
    const int64_t C = z.C, Dh = z.Dh, T = z.T, first = (c + 1) * C, valid = T - first;
    float* block = out + first * T + c * C;
    gemm(false, true, valid, C, Dh, 1.0f, Y, Dh, row(keys, c), Dh, 0.0f, block, T);
    if (what == Scores::kBias) gemm(false, true, valid, C, Dh, -scale, q + first * Dh, Dh, row(k, c), Dh, 1.0f, block, T);
  }

  // Every score of the pair into `out` (T x T, row stride T; or null: only the chunks' quantities
  // and the Y_c), by
  // the transforms and the key chunks from the last down; `carried`: where each Y_c is kept
  // (carried_offset), or null (the rotating `current` and `next`)
  void scores(float scale, Scores what, float* out, float* carried) {
    for (int64_t c = 0; c < z.n; ++c) transform(c, scale, what, out);
    int64_t rows = 0;
    for (int64_t c = z.n - 2; c >= 0; --c) {
      if (carried) {
        carry(c, c == z.n - 2 ? nullptr : carried + carried_offset(c + 1), rows, carried + carried_offset(c));
      } else {
        carry(c, current, rows, next);
        std::swap(current, next);
      }
      rows += z.C;
      between(c, carried ? carried + carried_offset(c) : current, scale, what, out);
    }
  }

  // Where Y_c (c = n - 2 down to 0, (n - 1 - c) C rows each) is kept, one after the other
  int64_t carried_offset(int64_t c) const { return z.C * z.Dh * (z.n - 2 - c) * (z.n - 1 - c) / 2; }
};

// A pair's gradient buffers (padded) and the backward's scratch
struct PairGradients {
  std::vector<float> dq, dk, dw, dbeta, dqueries, dkeys, dtransport, dcarried, dnext;
  std::vector<float> dinside, dsolved, dlower, dsystem, dproducts, dplain;
  explicit PairGradients(const Sizes& z)
      : dq(z.padded() * z.Dh), dk(dq.size()), dw(dq.size()), dbeta(z.padded()), dqueries(dq.size()),
        dkeys(dq.size()), dtransport(z.n * z.Dh * z.Dh), dcarried(dq.size()), dnext(dq.size()), dinside(z.C * z.C),
        dsolved(z.C * z.solved()), dlower(z.C * z.C), dsystem(z.C * z.C), dproducts(z.C * z.C), dplain(z.C * z.C) {}
};

// The backward of Pair::scores from g = dL/dscores (T x T, row stride T; on and above the
// diagonal not read), `carried` as scores kept it: the gradients of q, k, w, beta into `d`
void scores_backward(Pair& pair, const float* g, float scale, Scores what, const float* carried, PairGradients& d) {
  const Sizes& z = pair.z;
  const int64_t T = z.T, C = z.C, Dh = z.Dh, S = z.solved(), n = z.n;
  for (auto* buffer : {&d.dq, &d.dk, &d.dw, &d.dbeta, &d.dqueries, &d.dkeys, &d.dtransport, &d.dcarried})
    std::fill(buffer->begin(), buffer->end(), 0.0f);
  // between chunks, key chunk c from the first: dcarried holds dL/dY_c
  for (int64_t c = 0; c + 1 < n; ++c) {
    const int64_t first = (c + 1) * C, valid = T - first, rows = (n - 1 - c) * C;
    const float* block = g + first * T + c * C;
    const float* Y = carried + pair.carried_offset(c);
    gemm(false, false, valid, Dh, C, 1.0f, block, T, pair.row(pair.keys, c), Dh, 1.0f, d.dcarried.data(), Dh);
    gemm(true, false, C, Dh, valid, 1.0f, block, T, Y, Dh, 0.0f, pair.row(d.dkeys.data(), c), Dh);
    if (what == Scores::kBias) {  // less scale q k^T
      gemm(true, false, C, Dh, valid, -scale, block, T, pair.q + first * Dh, Dh, 1.0f, pair.row(d.dk.data(), c), Dh);
      gemm(false, false, valid, Dh, C, -scale, block, T, pair.row(pair.k, c), Dh, 1.0f, d.dq.data() + first * Dh, Dh);
    }
    float* dq_next = pair.row(d.dqueries.data(), c + 1);
    for (int64_t e = 0; e < C * Dh; ++e) dq_next[e] += d.dcarried[e];
    if (rows > C) {  // Y_c's other rows are Y_(c+1) P_(c+1)
      const float* dZ = d.dcarried.data() + C * Dh;
      gemm(true, false, Dh, Dh, rows - C, 1.0f, carried + pair.carried_offset(c + 1), Dh, dZ, Dh, 0.0f,
           d.dtransport.data() + (c + 1) * Dh * Dh, Dh);
      gemm(false, true, rows - C, Dh, Dh, 1.0f, dZ, Dh, pair.transport_of(c + 1), Dh, 0.0f, d.dnext.data(), Dh);
      std::swap(d.dcarried, d.dnext);
    }
  }
  // inside each chunk, backward through the transform
  for (int64_t c = 0; c < n; ++c) {
    const int64_t s = c * C, valid = std::min(C, T - s);
    const float *Q = pair.row(pair.q, c), *K = pair.row(pair.k, c), *W = pair.row(pair.w, c), *b = pair.beta + s;
    const float *M = pair.lower_of(c), *X = pair.solved_of(c), *U = X, *Wt = X + C;
    const float *dK = pair.row(d.dkeys.data(), c), *dQt = pair.row(d.dqueries.data(), c);
    const float* dP = d.dtransport.data() + c * Dh * Dh;
    float *dq_c = pair.row(d.dq.data(), c), *dk_c = pair.row(d.dk.data(), c), *dw_c = pair.row(d.dw.data(), c);
    float* db = d.dbeta.data() + s;
    // the diagonal block's gradient, below the diagonal (and, for the logits' scale q k^T, on it)
    std::fill(d.dinside.begin(), d.dinside.end(), 0.0f);
    for (int64_t i = 0; i < valid; ++i) std::memcpy(d.dinside.data() + i * C, g + (s + i) * T + s, i * sizeof(float));
    if (what == Scores::kLogits) {
      float* G = d.dplain.data();
      std::copy(d.dinside.begin(), d.dinside.end(), G);
      for (int64_t i = 0; i < valid; ++i) G[i * C + i] = g[(s + i) * T + s + i];
      gemm(false, false, C, Dh, C, scale, G, C, K, Dh, 1.0f, dq_c, Dh);
      gemm(true, false, C, Dh, C, scale, G, C, Q, Dh, 1.0f, dk_c, Dh);
    }
    float* dX = d.dsolved.data();
    gemm(false, true, C, C, Dh, -scale, W, Dh, dK, Dh, 0.0f, dX, S);             // dU through the keys
    gemm(true, false, C, C, C, -scale, M, C, d.dinside.data(), C, 1.0f, dX, S);  // and through the block
    gemm(true, false, C, Dh, C, -1.0f, M, C, dQt, Dh, 0.0f, dX + C, S);          // dWt through the queries
    gemm(false, false, C, Dh, Dh, -1.0f, W, Dh, dP, Dh, 1.0f, dX + C, S);        // and through P
    float* dM = d.dlower.data();
    gemm(false, true, C, C, C, -scale, d.dinside.data(), C, U, S, 0.0f, dM, C);
    gemm(false, true, C, C, Dh, -1.0f, dQt, Dh, Wt, S, 1.0f, dM, C);
    for (int64_t i = 0; i < C; ++i) std::fill(dM + i * C + i + 1, dM + (i + 1) * C, 0.0f);
    for (int64_t e = 0; e < C * Dh; ++e) dk_c[e] += scale * dK[e], dq_c[e] += dQt[e];
    gemm(false, false, C, Dh, C, -scale, U, S, dK, Dh, 1.0f, dw_c, Dh);
    gemm(false, true, C, Dh, Dh, -1.0f, Wt, S, dP, Dh, 1.0f, dw_c, Dh);
    // through the solve: dR = A^-T dX (from the last row up), dA = -dR X^T below the diagonal
    float* WW = pair.square;
    gemm(false, true, C, C, Dh, 1.0f, W, Dh, W, Dh, 0.0f, WW, C);
    for (int64_t t = C - 1; t > 0; --t) {
      const float* x = dX + t * S;
      for (int64_t u = 0; u < t; ++u) {
        const float a = b[t] * WW[t * C + u];
        float* y = dX + u * S;
#pragma omp simd
        for (int64_t m = 0; m < S; ++m) y[m] -= a * x[m];
      }
    }
    float* dA = d.dsystem.data();
    gemm(false, true, C, C, S, -1.0f, dX, S, X, S, 0.0f, dA, C);
    float* WK = d.dproducts.data();
    gemm(false, true, C, C, Dh, 1.0f, W, Dh, K, Dh, 0.0f, WK, C);
    for (int64_t t = 0; t < C; ++t) {
      float sum = 0.0f;
      const float* dR = dX + t * S;
      for (int64_t u = 0; u < t; ++u) {
        sum += dA[t * C + u] * WW[t * C + u] + dR[u] * WK[t * C + u];
        dA[t * C + u] *= b[t];         // now dL/d(W W^T) below the diagonal
        WK[t * C + u] = b[t] * dR[u];  // now dL/d(W K^T) below the diagonal
      }
      std::fill(dA + t * C + t, dA + (t + 1) * C, 0.0f);
      std::fill(WK + t * C + t, WK + (t + 1) * C, 0.0f);
      for (int64_t e = 0; e < Dh; ++e) {
        sum += dR[C + e] * W[t * Dh + e];
        dw_c[t * Dh + e] += b[t] * dR[C + e];
      }
      db[t] += sum;
    }
    gemm(false, false, C, Dh, C, 1.0f, dA, C, W, Dh, 1.0f, dw_c, Dh);  // W W^T, both sides
    gemm(true, false, C, Dh, C, 1.0f, dA, C, W, Dh, 1.0f, dw_c, Dh);
    gemm(false, false, C, Dh, C, 1.0f, WK, C, K, Dh, 1.0f, dw_c, Dh);  // W K^T
    gemm(true, false, C, Dh, C, 1.0f, WK, C, W, Dh, 1.0f, dk_c, Dh);
    gemm(false, false, C, Dh, C, 1.0f, dM, C, W, Dh, 1.0f, dq_c, Dh);  // tril(Q W^T)
    gemm(true, false, C, Dh, C, 1.0f, dM, C, Q, Dh, 1.0f, dw_c, Dh);
  }
}

Sizes sizes_of(const torch::Tensor& q, int64_t chunk) {
  TORCH_CHECK(chunk > 0, "path: the chunk size must be positive, got ", chunk);
  const int64_t T = q.size(2), C = std::max<int64_t>(1, std::min(chunk, T));
  return {T, q.size(3), C, (T + C - 1) / C};
}

torch::Tensor contiguous_float(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "path: the chunked CPU form takes float32 CPU tensors");
  return x.contiguous();
}

// The inputs of one call, contiguous float32, and the pair's rows in them
struct Inputs {
  torch::Tensor q, k, w, beta;
  Inputs(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& w_in, const torch::Tensor& beta_in)
      : q(contiguous_float(q_in)), k(contiguous_float(k_in)), w(contiguous_float(w_in)), beta(contiguous_float(beta_in)) {}
  void load(Pair& pair, int64_t p) const {
    pair.load(p, q.data_ptr<float>(), k.data_ptr<float>(), w.data_ptr<float>(), beta.data_ptr<float>());
  }
};

// A pair's gradients (rows < T) into the outputs
void store(const PairGradients& d, int64_t p, int64_t T, int64_t Dh, torch::Tensor& grad_q, torch::Tensor& grad_k,
           torch::Tensor& grad_w, torch::Tensor& grad_beta) {
  std::memcpy(grad_q.data_ptr<float>() + p * T * Dh, d.dq.data(), T * Dh * sizeof(float));
  std::memcpy(grad_k.data_ptr<float>() + p * T * Dh, d.dk.data(), T * Dh * sizeof(float));
  std::memcpy(grad_w.data_ptr<float>() + p * T * Dh, d.dw.data(), T * Dh * sizeof(float));
  std::memcpy(grad_beta.data_ptr<float>() + p * T, d.dbeta.data(), T * sizeof(float));
}

// An additive (B|1, 1, T|1, T) key mask's rows: pair p's row i at rows(p) + i * row_stride
struct MaskRows {
  torch::Tensor mask;
  int64_t heads = 1, batch_stride = 0, row_stride = 0;
  MaskRows(const torch::Tensor& key_mask, int64_t heads_in) : heads(heads_in) {
    if (!key_mask.defined() || key_mask.numel() == 0) return;
    TORCH_CHECK(key_mask.dim() == 4 && key_mask.size(1) == 1, "path: key_mask must be (B|1, 1, T|1, T), got ",
                key_mask.sizes());
    mask = key_mask.to(torch::kFloat32).contiguous();
    batch_stride = mask.size(0) == 1 ? 0 : mask.stride(0);
    row_stride = mask.size(2) == 1 ? 0 : mask.stride(2);
  }
  const float* rows(int64_t p) const { return mask.defined() ? mask.data_ptr<float>() + (p / heads) * batch_stride : nullptr; }
};

}  // namespace

torch::Tensor bias_forward(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& w_in,
                           const torch::Tensor& beta_in, double scale, int64_t chunk) {
  const Inputs in(q_in, k_in, w_in, beta_in);
  const Sizes z = sizes_of(in.q, chunk);
  const int64_t pairs = in.q.size(0) * in.q.size(1), T = z.T;
  auto bias = torch::empty({in.q.size(0), in.q.size(1), T, T}, in.q.options());
  at::parallel_for(0, pairs, 1, [&](int64_t begin, int64_t end) {
    Pair pair(z);
    for (int64_t p = begin; p < end; ++p) {
      in.load(pair, p);
      pair.scores(static_cast<float>(scale), Scores::kBias, bias.data_ptr<float>() + p * T * T, nullptr);
    }
  });
  return bias;
}

std::array<torch::Tensor, 4> bias_backward(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                           const torch::Tensor& w_in, const torch::Tensor& beta_in,
                                           const torch::Tensor& grad_bias, double scale, int64_t chunk) {
  const Inputs in(q_in, k_in, w_in, beta_in);
  const auto grad = contiguous_float(grad_bias);
  const Sizes z = sizes_of(in.q, chunk);
  const int64_t pairs = in.q.size(0) * in.q.size(1), T = z.T;
  auto grad_q = torch::empty_like(in.q), grad_k = torch::empty_like(in.k), grad_w = torch::empty_like(in.w);
  auto grad_beta = torch::empty_like(in.beta);
  at::parallel_for(0, pairs, 1, [&](int64_t begin, int64_t end) {
    Pair pair(z);
    PairGradients d(z);
    std::vector<float> carried(std::max<int64_t>(pair.carried_offset(-1), 1));
    for (int64_t p = begin; p < end; ++p) {
      in.load(pair, p);
      pair.scores(static_cast<float>(scale), Scores::kBias, nullptr, carried.data());  // Y_c only
      scores_backward(pair, grad.data_ptr<float>() + p * T * T, static_cast<float>(scale), Scores::kBias,
                      carried.data(), d);
      store(d, p, T, z.Dh, grad_q, grad_k, grad_w, grad_beta);
    }
  });
  return {grad_q, grad_k, grad_w, grad_beta};
}

std::pair<torch::Tensor, torch::Tensor> attention_forward(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                                          const torch::Tensor& v_in, const torch::Tensor& w_in,
                                                          const torch::Tensor& beta_in, const torch::Tensor& key_mask,
                                                          double scale, int64_t chunk) {
  const Inputs in(q_in, k_in, w_in, beta_in);
  const auto v = contiguous_float(v_in);
  const Sizes z = sizes_of(in.q, chunk);
  const int64_t B = in.q.size(0), H = in.q.size(1), T = z.T, Dh = z.Dh, C = z.C;
  TORCH_CHECK(v.sizes() == in.q.sizes(), "path: v must be shaped as q, got ", v.sizes(), " and ", in.q.sizes());
  const MaskRows mask(key_mask, H);
  auto out = torch::empty_like(in.q);
  auto lse = torch::empty({B, H, T}, in.q.options());
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    Pair pair(z);
    std::vector<float> logits(T * T);
    for (int64_t p = begin; p < end; ++p) {
      in.load(pair, p);
      pair.scores(static_cast<float>(scale), Scores::kLogits, logits.data(), nullptr);
      const float *vp = v.data_ptr<float>() + p * T * Dh, *m = mask.rows(p);
      float *op = out.data_ptr<float>() + p * T * Dh, *lp = lse.data_ptr<float>() + p * T;
      for (int64_t r0 = 0; r0 < T; r0 += C) {  // a block of query rows and the keys up to its last
        const int64_t rows = std::min(C, T - r0), keys = r0 + rows;
        kernels::path_softmax_rows(logits.data(), T, r0, rows, keys, m, mask.row_stride, lp);
        gemm(false, false, rows, Dh, keys, 1.0f, logits.data() + r0 * T, T, vp, Dh, 0.0f, op + r0 * Dh, Dh);
      }
    }
  });
  return {out, lse};
}

std::array<torch::Tensor, 5> attention_backward(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                                const torch::Tensor& v_in, const torch::Tensor& w_in,
                                                const torch::Tensor& beta_in, const torch::Tensor& key_mask,
                                                const torch::Tensor& out_in, const torch::Tensor& lse_in,
                                                const torch::Tensor& grad_out_in, double scale, int64_t chunk) {
  const Inputs in(q_in, k_in, w_in, beta_in);
  const auto v = contiguous_float(v_in), out = contiguous_float(out_in), lse = contiguous_float(lse_in);
  const auto grad_out = contiguous_float(grad_out_in);
  const Sizes z = sizes_of(in.q, chunk);
  const int64_t B = in.q.size(0), H = in.q.size(1), T = z.T, Dh = z.Dh, C = z.C;
  const MaskRows mask(key_mask, H);
  const auto delta = (grad_out * out).sum(-1).contiguous();  // (B, H, T): dout_i . out_i
  auto grad_q = torch::empty_like(in.q), grad_k = torch::empty_like(in.k), grad_v = torch::empty_like(v);
  auto grad_w = torch::empty_like(in.w), grad_beta = torch::empty_like(in.beta);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    Pair pair(z);
    PairGradients d(z);
    std::vector<float> carried(std::max<int64_t>(pair.carried_offset(-1), 1)), probabilities(T * T),
        grad(T * T);
    for (int64_t p = begin; p < end; ++p) {
      in.load(pair, p);
      pair.scores(static_cast<float>(scale), Scores::kLogits, probabilities.data(), carried.data());
      const float *vp = v.data_ptr<float>() + p * T * Dh, *dout = grad_out.data_ptr<float>() + p * T * Dh;
      float* dv = grad_v.data_ptr<float>() + p * T * Dh;
      std::fill(dv, dv + T * Dh, 0.0f);
      for (int64_t r0 = 0; r0 < T; r0 += C) {
        const int64_t rows = std::min(C, T - r0), keys = r0 + rows;
        float *pr = probabilities.data() + r0 * T, *gr = grad.data() + r0 * T;
        gemm(false, true, rows, keys, Dh, 1.0f, dout + r0 * Dh, Dh, vp, Dh, 0.0f, gr, T);  // dout_i . v_j
        kernels::path_softmax_rows_backward(probabilities.data(), grad.data(), T, r0, rows, keys, mask.rows(p),
                                            mask.row_stride, lse.data_ptr<float>() + p * T,
                                            delta.data_ptr<float>() + p * T);
        gemm(true, false, keys, Dh, rows, 1.0f, pr, T, dout + r0 * Dh, Dh, 1.0f, dv, Dh);  // dv += p^T dout
      }
      scores_backward(pair, grad.data(), static_cast<float>(scale), Scores::kLogits, carried.data(), d);
      store(d, p, T, Dh, grad_q, grad_k, grad_w, grad_beta);
    }
  });
  return {grad_q, grad_k, grad_v, grad_w, grad_beta};
}

}  // namespace pelab::path_chunks
