#include "core/kernels/layer_norm.h"

#include <cmath>

#include "core/kernels/vector_math.h"

namespace pelab::kernels {

namespace {

// sum_c f(c) over a row: vectors V (the instruction set's own width, see vector_math.h) for
// the whole vectors, then the tail one by one.
template <class V, class Vector, class Scalar>
PELAB_INLINE float row_sum(int64_t cols, const Vector& vector_term, const Scalar& scalar_term) {
  V sums = {};
  int64_t c = 0;
  for (; c + kLanesOf<V> <= cols; c += kLanesOf<V>) sums += vector_term(c);
  float sum = horizontal_sum(sums);
  for (; c < cols; ++c) sum += scalar_term(c);
  return sum;
}

template <class V>
PELAB_INLINE void forward_rows(const float* __restrict x, const float* __restrict weight, const float* __restrict bias,
                               float eps, float* __restrict y, float* __restrict mean, float* __restrict rstd,
                               int64_t rows, int64_t cols) {
  const float inverse_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float m = inverse_cols * row_sum<V>(
                                       cols, [&](int64_t c) { return load<V>(xr + c); },
                                       [&](int64_t c) { return xr[c]; });
    const float variance = inverse_cols * row_sum<V>(
                                              cols,
                                              [&](int64_t c) {
                                                const V d = load<V>(xr + c) - m;
                                                return d * d;
                                              },
                                              [&](int64_t c) { return (xr[c] - m) * (xr[c] - m); });
    const float s = 1.0f / std::sqrt(variance + eps);
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

template <class V>
PELAB_INLINE void backward_rows(const float* __restrict x, const float* __restrict weight, const float* __restrict mean,
                                const float* __restrict rstd, const float* __restrict grad_y, float* __restrict grad_x,
                                float* __restrict weight_sums, float* __restrict bias_sums, int64_t rows,
                                int64_t cols) {
  const float inverse_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *gy = grad_y + r * cols;
    float* gx = grad_x + r * cols;
    const float m = mean[r], s = rstd[r];
    // g = grad_y weight: mean_c g and mean_c g xhat
    const float g_mean = inverse_cols * row_sum<V>(
                                            cols, [&](int64_t c) { return load<V>(gy + c) * load<V>(weight + c); },
                                            [&](int64_t c) { return gy[c] * weight[c]; });
    const float gx_mean = inverse_cols * row_sum<V>(
                                             cols,
                                             [&](int64_t c) {
                                               return load<V>(gy + c) * load<V>(weight + c) *
                                                      ((load<V>(xr + c) - m) * s);
                                             },
                                             [&](int64_t c) { return gy[c] * weight[c] * ((xr[c] - m) * s); });
    for (int64_t c = 0; c < cols; ++c) {  // (GCC unswitches the loop on the two pointers)
      const float xhat = (xr[c] - m) * s;
      gx[c] = s * (gy[c] * weight[c] - g_mean - xhat * gx_mean);
      if (weight_sums) weight_sums[c] += gy[c] * xhat;
      if (bias_sums) bias_sums[c] += gy[c];
    }
  }
}

#define PELAB_LAYER_NORM_COPIES(suffix, attributes, V)                                                              \
  attributes void forward_##suffix(const float* x, const float* weight, const float* bias, float eps, float* y,     \
                                   float* mean, float* rstd, int64_t rows, int64_t cols) {                          \
    forward_rows<V>(x, weight, bias, eps, y, mean, rstd, rows, cols);                                               \
  }                                                                                                                 \
  attributes void backward_##suffix(const float* x, const float* weight, const float* mean, const float* rstd,      \
                                    const float* grad_y, float* grad_x, float* weight_sums, float* bias_sums,       \
                                    int64_t rows, int64_t cols) {                                                   \
    backward_rows<V>(x, weight, mean, rstd, grad_y, grad_x, weight_sums, bias_sums, rows, cols);                    \
  }
PELAB_LAYER_NORM_COPIES(baseline, , BaselineStores::Vector)
#ifdef PELAB_X86_DISPATCH
PELAB_LAYER_NORM_COPIES(avx2, PELAB_AVX2, Avx2Stores::Vector)
PELAB_LAYER_NORM_COPIES(avx512, PELAB_AVX512, Avx512Stores::Vector)
#endif
#undef PELAB_LAYER_NORM_COPIES

}  // namespace

void layer_norm_forward(const float* x, const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, int64_t rows, int64_t cols) {
  PELAB_PICK_COPY(forward)(x, weight, bias, eps, y, mean, rstd, rows, cols);
}

void layer_norm_backward(const float* x, const float* weight, const float* mean, const float* rstd,
                         const float* grad_y, float* grad_x, float* weight_sums, float* bias_sums, int64_t rows,
                         int64_t cols) {
  PELAB_PICK_COPY(backward)(x, weight, mean, rstd, grad_y, grad_x, weight_sums, bias_sums, rows, cols);
}

}  // namespace pelab::kernels
