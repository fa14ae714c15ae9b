#include "core/kernels/gelu.h"

#include <cmath>

#include "core/kernels/vector_math.h"

namespace pelab::kernels {

namespace {

// Phi(x) and exp(-x^2 / 2), branch-free so that the loops below vectorize:
// erfc(z) ~= t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z), z >= 0
// (Abramowitz and Stegun 7.1.26, |error| <= 1.5e-7), at z = |x| / sqrt 2; Phi(x) = 1 -
// erfc(z) / 2 for x >= 0 and erfc(z) / 2 for x < 0 (the small tail directly, not as 1
// minus a number close to 1).
struct NormalCdf {
  float cdf, gaussian;  // Phi(x), exp(-x^2 / 2)
};
PELAB_INLINE NormalCdf normal_cdf(float x) {
  constexpr float kInverseSqrt2 = 0.70710678118654752f, kP = 0.3275911f;
  constexpr float kA1 = 0.254829592f, kA2 = -0.284496736f, kA3 = 1.421413741f, kA4 = -1.453152027f,
                  kA5 = 1.061405429f;
  const float z = std::fabs(x) * kInverseSqrt2;
  const float t = 1.0f / (1.0f + kP * z);
  const float gaussian = exp_nonpositive(-0.5f * x * x);
  const float half_erfc = 0.5f * t * (kA1 + t * (kA2 + t * (kA3 + t * (kA4 + t * kA5)))) * gaussian;
  return {x >= 0.0f ? 1.0f - half_erfc : half_erfc, gaussian};
}

// One row of cols elements: u = x + bias (bias null: u = x).
template <bool Bias>
PELAB_INLINE void forward_row(const float* __restrict x, const float* __restrict bias, float* __restrict y,
                              int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    const float u = Bias ? x[c] + bias[c] : x[c];
    y[c] = u * normal_cdf(u).cdf;
  }
}

template <bool Bias, bool SumColumns>
PELAB_INLINE void backward_row(const float* __restrict x, const float* __restrict bias, const float* __restrict grad_y,
                               float* __restrict grad_x, float* __restrict column_sums, int64_t cols) {
  constexpr float kInverseSqrt2Pi = 0.39894228040143268f;  // phi(u) = exp(-u^2 / 2) / sqrt(2 pi)
  for (int64_t c = 0; c < cols; ++c) {
    const float u = Bias ? x[c] + bias[c] : x[c];
    const NormalCdf cdf = normal_cdf(u);
    const float g = grad_y[c] * (cdf.cdf + u * kInverseSqrt2Pi * cdf.gaussian);
    grad_x[c] = g;
    if (SumColumns) column_sums[c] += g;
  }
}

PELAB_INLINE void forward_rows(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    if (bias)
      forward_row<true>(x + r * cols, bias, y + r * cols, cols);
    else
      forward_row<false>(x + r * cols, nullptr, y + r * cols, cols);
  }
}

PELAB_INLINE void backward_rows(const float* x, const float* bias, const float* grad_y, float* grad_x,
                                float* column_sums, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = r * cols;
    if (bias && column_sums)
      backward_row<true, true>(x + at, bias, grad_y + at, grad_x + at, column_sums, cols);
    else if (bias)
      backward_row<true, false>(x + at, bias, grad_y + at, grad_x + at, nullptr, cols);
    else if (column_sums)
      backward_row<false, true>(x + at, nullptr, grad_y + at, grad_x + at, column_sums, cols);
    else
      backward_row<false, false>(x + at, nullptr, grad_y + at, grad_x + at, nullptr, cols);
  }
}

#define PELAB_GELU_COPIES(suffix, attributes)                                                                       \
  attributes void forward_##suffix(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {        \
    forward_rows(x, bias, y, rows, cols);                                                                           \
  }                                                                                                                 \
  attributes void backward_##suffix(const float* x, const float* bias, const float* grad_y, float* grad_x,          \
                                    float* column_sums, int64_t rows, int64_t cols) {                               \
    backward_rows(x, bias, grad_y, grad_x, column_sums, rows, cols);                                                \
  }
PELAB_GELU_COPIES(baseline, )
#ifdef PELAB_X86_DISPATCH
PELAB_GELU_COPIES(avx2, PELAB_AVX2)
PELAB_GELU_COPIES(avx512, PELAB_AVX512)
#endif
#undef PELAB_GELU_COPIES

}  // namespace

void gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  PELAB_PICK_COPY(forward)(x, bias, y, rows, cols);
}

void gelu_backward(const float* x, const float* bias, const float* grad_y, float* grad_x, float* column_sums,
                   int64_t rows, int64_t cols) {
  PELAB_PICK_COPY(backward)(x, bias, grad_y, grad_x, column_sums, rows, cols);
}

}  // namespace pelab::kernels
