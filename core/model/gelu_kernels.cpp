#include "core/model/gelu_kernels.h"

#include <cmath>

#include "core/model/vector_math.h"

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

PELAB_INLINE void forward_loop(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]).cdf;
}

PELAB_INLINE void backward_loop(const float* __restrict x, const float* __restrict grad_y, float* __restrict grad_x,
                                int64_t n) {
  constexpr float kInverseSqrt2Pi = 0.39894228040143268f;  // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
  for (int64_t i = 0; i < n; ++i) {
    const NormalCdf c = normal_cdf(x[i]);
    grad_x[i] = grad_y[i] * (c.cdf + x[i] * kInverseSqrt2Pi * c.gaussian);
  }
}

void forward_baseline(const float* x, float* y, int64_t n) { forward_loop(x, y, n); }
void backward_baseline(const float* x, const float* g, float* dx, int64_t n) { backward_loop(x, g, dx, n); }
#ifdef PELAB_X86_DISPATCH
PELAB_AVX2 void forward_avx2(const float* x, float* y, int64_t n) { forward_loop(x, y, n); }
PELAB_AVX2 void backward_avx2(const float* x, const float* g, float* dx, int64_t n) { backward_loop(x, g, dx, n); }
PELAB_AVX512 void forward_avx512(const float* x, float* y, int64_t n) { forward_loop(x, y, n); }
PELAB_AVX512 void backward_avx512(const float* x, const float* g, float* dx, int64_t n) { backward_loop(x, g, dx, n); }
#endif

}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) { PELAB_PICK_COPY(forward)(x, y, n); }

void gelu_backward(const float* x, const float* grad_y, float* grad_x, int64_t n) {
  PELAB_PICK_COPY(backward)(x, grad_y, grad_x, n);
}

}  // namespace pelab::kernels
