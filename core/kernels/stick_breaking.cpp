#include "core/kernels/stick_breaking.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/row_math.h"

namespace pelab::kernels {

namespace {

// A row's stick below e^-87: every farther weight is below float's smallest normal number.
constexpr float kNothingLeft = -87.0f;

// log sigmoid(z), stable for large |z|; log sigmoid(-z) = log sigmoid(z) - z
float log_sigmoid(float z) { return z >= 0.0f ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }

bool masked(const StickBreakingInputs& in, int64_t b, int64_t i, int64_t j) {
  return in.mask.data && std::isinf(in.mask.at(b, 0, i)[j]);
}

// One query row's weights from the nearest key back: keys[n], z[n], weight[n] and (when asked,
// for the backward) sigmoid(z)[n] for the n keys drawn, nearest first, stopping where nothing is
// left. Two transcendental functions per key for the weight (log sigmoid's exp and log1p, and
// the weight's exp), one more for sigmoid(z).
int64_t row_weights(const StickBreakingInputs& in, int64_t b, int64_t h, int64_t i, int64_t Dh,
                    std::vector<int64_t>& keys, std::vector<float>& z, std::vector<float>& weight,
                    float* sigmoid_of_z = nullptr) {
  const float* q = in.q.at(b, h, i);
  float left = 0.0f;  // log of the stick left by the nearer keys
  int64_t n = 0;
  for (int64_t j = in.attend_current ? i : i - 1; j >= 0 && left > kNothingLeft; --j) {
    if (masked(in, b, i, j)) continue;
    const float score = in.scale * dot(q, in.k.at(b, h, j), Dh);
    const float taken = log_sigmoid(score);  // log beta
    keys[n] = j;
    z[n] = score;
    weight[n] = std::exp(taken + left);
    if (sigmoid_of_z) sigmoid_of_z[n] = std::exp(taken);
    left += taken - score;  // log (1 - beta)
    ++n;
  }
  return n;
}

}  // namespace

void stick_breaking_forward(const AttentionDims& dims, int64_t begin, int64_t end, const StickBreakingInputs& in,
                            MutableStrided out) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  std::vector<int64_t> keys(T);
  std::vector<float> z(T), weight(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t i = 0; i < T; ++i) {
      float* o = out.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) o[d] = 0.0f;
      const int64_t n = row_weights(in, b, h, i, Dh, keys, z, weight);
      for (int64_t c = 0; c < n; ++c) add_scaled(o, in.v.at(b, h, keys[c]), weight[c], Dh);
    }
  }
}

void stick_breaking_backward(const AttentionDims& dims, int64_t begin, int64_t end, const StickBreakingInputs& in,
                             Strided grad_out, MutableStrided grad_q, MutableStrided grad_k, MutableStrided grad_v) {
  const int64_t T = dims.queries, Dh = dims.head_dim;
  std::vector<int64_t> keys(T);
  std::vector<float> z(T), weight(T), sigmoid_of_z(T);
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / dims.heads, h = pair % dims.heads;
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < Dh; ++d) grad_k.at(b, h, j)[d] = grad_v.at(b, h, j)[d] = 0.0f;
    for (int64_t i = 0; i < T; ++i) {
      const float* dout = grad_out.at(b, h, i);
      const float* q = in.q.at(b, h, i);
      float* dq = grad_q.at(b, h, i);
      for (int64_t d = 0; d < Dh; ++d) dq[d] = 0.0f;
      const int64_t n = row_weights(in, b, h, i, Dh, keys, z, weight, sigmoid_of_z.data());
      // from the farthest key drawn to the nearest: `farther` = sum of g_j A_ij over the keys beyond
      float farther = 0.0f;
      for (int64_t c = n - 1; c >= 0; --c) {
        const int64_t j = keys[c];
        const float g = dot(dout, in.v.at(b, h, j), Dh);
        add_scaled(grad_v.at(b, h, j), dout, weight[c], Dh);
        const float dz = g * weight[c] * (1.0f - sigmoid_of_z[c]) - sigmoid_of_z[c] * farther;
        farther += g * weight[c];
        add_scaled(dq, in.k.at(b, h, j), in.scale * dz, Dh);
        add_scaled(grad_k.at(b, h, j), q, in.scale * dz, Dh);
      }
    }
  }
}

}  // namespace pelab::kernels
