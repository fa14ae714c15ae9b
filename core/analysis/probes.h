// Linear position probes (closed-form ridge regression) on hidden states: how much
// position information each layer's output still carries. Probes are fitted on the
// tokens of one half of the sequences and scored on the other half, so fit and test never
// share a sequence.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pelab {

struct ProbeResult {
  int64_t length = 0;              // task length of the probed sequences
  int64_t layer = 0;               // 0: the embedding output, l: the output of block l
  double position_accuracy = 0;    // absolute position as a T-way classification (argmax of a
                                   //   ridge regression onto one-hot positions)
  double position_chance = 0;      // the same probe on one-hot token ids: what the tokens alone
                                   //   reveal of position (1/T when nothing)
  double position_r2 = 0;          // R^2 of a ridge regression onto position / (T - 1)
  double order_accuracy = 0;       // is i before j, from [h_i, h_j] (sign of a ridge regression)
  double distance_r2 = 0;          // R^2 of a ridge regression of |i - j| on [h_i, h_j]
  int64_t step = 0;                // the training step probed
  std::string sampler = "contiguous";  // the positions the probed sequences had
  int64_t positions_max_length = 0;
  std::string method = "none";     // the extrapolation method of the probed forward passes
  // Rows of one probing: the same length and settings (the layers differ).
  bool same_settings(const ProbeResult& other) const {
    return length == other.length && method == other.method && step == other.step && sampler == other.sampler &&
           positions_max_length == other.positions_max_length;
  }
};

// Closed-form ridge regression with a bias: W = (X'X + lambda I)^-1 X'Y with lambda =
// `ridge` x trace(X'X) / d, fitted on (x_fit, y_fit); returns the predictions for x_test.
// x: (n, d), y: (n, k) -> (m, k), in float64.
torch::Tensor ridge_predict(const torch::Tensor& x_fit, const torch::Tensor& y_fit, const torch::Tensor& x_test,
                            double ridge);

// ridge_predict on one-hot token features (vocab_size columns) and the bias, in closed form:
// the Gram matrix is the diagonal of token counts bordered by the bias, so the solve is
// O(vocab x k) instead of a dense (vocab + 1)^2 system (a BERT vocabulary of 30522 ids).
// The same lambda (ridge x trace / (vocab_size + 1)). tokens: (n), (m) int64; y: (n, k) -> (m, k).
torch::Tensor one_hot_ridge_predict(const torch::Tensor& tokens_fit, const torch::Tensor& y_fit,
                                    const torch::Tensor& tokens_test, int64_t vocab_size, double ridge);

// hidden: (layers + 1) x (N, T, D), tokens: (N, T), all positions valid; N >= 2.
std::vector<ProbeResult> position_probes(const std::vector<torch::Tensor>& hidden, const torch::Tensor& tokens,
                                         int64_t vocab_size, int64_t length, double ridge, uint64_t seed);

}  // namespace pelab
