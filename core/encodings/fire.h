// `fire`: Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long
// Context Transformers" (FIRE). A learned MLP of the progressively interpolated log distance:
//   b_h(i, j) = f_h( psi(|i - j|) / (psi(max(L, i)) + eps) ),   psi(x) = log(|c x| + 1)
// with i the query position and i - j = query - key. f: Linear(1, mlp_width) -> ReLU ->
// Linear(mlp_width, H); c (init 0.1) and L = |L_multiplier * max_length| (multiplier init 1,
// max_length 512) are learned, eps = 1e-6; one set per layer (the paper's appendix code as
// reproduced in e.g. mcleish7/arithmetic cramming/architectures/embeddings.py). The
// reference is causal; bidirectional mode uses |i - j| (the same formula). Translation
// invariant while query positions stay below L.
//
// The MLP is evaluated exactly without its (Tq, Tk, mlp_width) hidden layer: a ReLU MLP of a
// scalar is piecewise linear with a kink where each hidden unit switches, so per segment it
// is A_s x + B_s; each (i, j) looks up its segment (bucketize) and takes A x + B. Memory is
// (Tq, Tk, H), like any bias; `tests/test_relative_schemes.cpp` checks it against the MLP.
// On a GPU the plain MLP runs instead: there the lookup's backward (Tq x Tk rows added into
// W + 1, which serializes on a few rows) is much slower than the MLP's matrix products
// (docs/performance.md, "NVIDIA H100").
#pragma once

#include "core/encodings/position_encoding.h"
#include "core/config/options.h"

namespace pelab {

class FireImpl : public PositionEncodingImpl {
 public:
  FireImpl(const EncodingContext& context, const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override;

  // The MLP input for every (query, key): (B'|1, Tq, Tk).
  torch::Tensor interpolated_distance(const Positions& positions, int64_t layer) const;
  // f(x) for x of any shape -> (..., H): exact piecewise-linear evaluation, and the plain MLP.
  torch::Tensor mlp(const torch::Tensor& x, int64_t layer);
  torch::Tensor mlp_reference(const torch::Tensor& x, int64_t layer);

 private:
  // L = |L_multiplier * max_length|, a scalar tensor
  torch::Tensor threshold(int64_t layer) const;
  // psi(distance) / (psi(normaliser) + eps), psi(x) = log(|c x| + 1)
  torch::Tensor psi_ratio(const torch::Tensor& distance, const torch::Tensor& normaliser, int64_t layer) const;

  double max_length_, eps_;
  torch::nn::ModuleList hidden_{nullptr}, output_{nullptr};  // per layer: Linear(1, W), Linear(W, H)
  std::vector<torch::Tensor> c_, length_multiplier_;        // per layer: scalars
};

}  // namespace pelab
