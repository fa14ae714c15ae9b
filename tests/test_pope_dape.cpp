// PoPE and DAPE against their formulas written as loops: values and gradients.
#include "tests/catch.h"

#include <cmath>

#include "core/encodings/alibi.h"
#include "core/encodings/dape.h"
#include "core/encodings/pope.h"
#include "core/encodings/registry.h"
#include "tests/support.h"

using namespace pelab;
using namespace pelab::test;

namespace {

OptionValues options_of(const std::string& scheme, const std::vector<std::pair<std::string, OptionValue>>& set = {}) {
  return scheme_variant(scheme, set).options;
}

// Positions with gaps (a randomized draw), one row per batch element.
Positions gapped_positions(int64_t batch) {
  const auto row = torch::tensor({0, 2, 3, 7, 11}, torch::kInt64);
  const auto positions = row.unsqueeze(0).expand({batch, row.size(0)}).contiguous();
  return {positions, positions};
}

}  // namespace

CATCH_TEST_CASE("pope: q'.k' = sum_c softplus(q_c) softplus(k_c) cos((p_q - p_k) theta_c - delta_c), values and "
                "gradients",
                "[pope]") {
  const int64_t B = 2, H = 2, Dh = 4, T = 5;
  EncodingContext context{H * Dh, H, 1, false, "pope"};
  PopeImpl pope(context, options_of("pope", {{"base", 100.0}}));
  torch::manual_seed(3);
  auto bias = pope.named_parameters()["key_bias"];
  {
    torch::NoGradGuard no_grad;
    bias.copy_(torch::tensor({{-1.0, -7.0, 0.5, -3.0}, {-0.2, -6.0, -2.5, 1.0}}));  // some outside [-2 pi, 0]
  }
  const auto q = torch::randn({B, H, T, Dh}, torch::requires_grad()), k = torch::randn({B, H, T, Dh}, torch::requires_grad());
  const Positions positions = gapped_positions(B);
  const auto w = torch::zeros({3 * H * Dh, H * Dh}), b = torch::zeros({3 * H * Dh});
  const auto [qr, kr] = pope.rotate(q, k, {positions, 0, w, b});
  CATCH_REQUIRE(qr.sizes() == torch::IntArrayRef({B, H, T, 2 * Dh}));
  const auto scores = torch::matmul(qr, kr.transpose(-2, -1));  // (B, H, T, T)

  const auto pos = positions.query[0];
  std::vector<torch::Tensor> expected_rows;
  const auto sq = torch::softplus(q), sk = torch::softplus(k);
  const auto delta = bias.clamp(-2 * M_PI, 0.0);
  torch::Tensor expected = torch::zeros({B, H, T, T});
  std::vector<torch::Tensor> cells;
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          torch::Tensor sum = torch::zeros({});
          for (int64_t c = 0; c < Dh; ++c) {
            const double theta = std::pow(100.0, -double(c) / Dh);
            const double offset = double(pos[i].item<int64_t>() - pos[j].item<int64_t>());
            sum = sum + sq[bi][h][i][c] * sk[bi][h][j][c] * torch::cos(offset * theta - delta[h][c]);
          }
          cells.push_back(sum);
        }
  expected = torch::stack(cells).view({B, H, T, T});
  CATCH_CHECK(torch::allclose(scores, expected, 1e-5, 1e-5));
  // gradients of q, k and the bias (0 where the clamp holds it)
  const auto cotangent = torch::randn({B, H, T, T});
  auto grads = torch::autograd::grad({(scores * cotangent).sum()}, {q, k, bias});
  auto expected_grads = torch::autograd::grad({(expected * cotangent).sum()}, {q, k, bias});
  for (size_t g = 0; g < 3; ++g) CATCH_CHECK(torch::allclose(grads[g], expected_grads[g], 1e-4, 1e-5));
  CATCH_CHECK(grads[2][0][1].item<double>() == 0.0);  // -7 < -2 pi: clamped
  CATCH_CHECK(grads[2][0][2].item<double>() == 0.0);  // 0.5 > 0
  CATCH_CHECK(grads[2][0][0].item<double>() != 0.0);
  // relative: shifting every position changes no score
  const Positions shifted(positions.query + 9, positions.key + 9);
  const auto [qs, ks] = pope.rotate(q, k, {shifted, 0, w, b});
  CATCH_CHECK(torch::allclose(torch::matmul(qs, ks.transpose(-2, -1)), scores, 1e-4, 1e-5));
}

CATCH_TEST_CASE("dape: A + B + f(A, B) per query-key pair over the heads, values and gradients", "[dape]") {
  const int64_t B = 2, H = 2, Dh = 4, T = 5;
  for (bool causal : {false, true}) {
    CATCH_CAPTURE(causal);
    EncodingContext context{H * Dh, H, 1, causal, "dape"};
    torch::manual_seed(5);
    DapeImpl dape(context, options_of("dape", {{"bias", std::string("alibi")}, {"mlp_width", int64_t{3}}}));
    auto parameters = dape.named_parameters();
    const auto W1 = parameters["mlp_in.0.weight"], b1 = parameters["mlp_in.0.bias"];
    const auto W2 = parameters["mlp_out.0.weight"], b2 = parameters["mlp_out.0.bias"];
    CATCH_REQUIRE(W1.sizes() == torch::IntArrayRef({3, 2 * H}));
    const auto q = torch::randn({B, H, T, Dh}, torch::requires_grad()), k = torch::randn({B, H, T, Dh}, torch::requires_grad());
    const Positions positions = gapped_positions(B);
    const auto w = torch::zeros({3 * H * Dh, H * Dh}), b = torch::zeros({3 * H * Dh});
    const auto bias = dape.score_bias(q, k, {positions, 0, w, b});  // B + f([A, B])
    const auto slopes = alibi_slopes(H);
    const auto pos = positions.query[0];
    std::vector<torch::Tensor> cells;
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          std::vector<torch::Tensor> logits, fixed;
          for (int64_t h = 0; h < H; ++h) {
            logits.push_back((q[bi][h][i] * k[bi][h][j]).sum() / std::sqrt(double(Dh)));
            const double distance = std::abs(double(pos[i].item<int64_t>() - pos[j].item<int64_t>()));
            fixed.push_back(torch::full({}, -slopes[h].item<double>() * distance));
          }
          auto features = torch::cat({torch::stack(logits), torch::stack(fixed)});  // (2H): [A_h..., B_h...]
          auto hidden = torch::leaky_relu(torch::matmul(W1, features) + b1, 0.01);
          auto adaptive = torch::matmul(W2, hidden) + b2;  // (H)
          cells.push_back(torch::stack(fixed) + adaptive);
        }
    const auto expected = torch::stack(cells).view({B, T, T, H}).permute({0, 3, 1, 2});
    CATCH_CHECK(torch::allclose(bias, expected, 1e-5, 1e-5));
    const auto cotangent = torch::randn({B, H, T, T});
    auto grads = torch::autograd::grad({(bias * cotangent).sum()}, {q, k, W1, b1, W2, b2});
    auto expected_grads = torch::autograd::grad({(expected * cotangent).sum()}, {q, k, W1, b1, W2, b2});
    for (size_t g = 0; g < grads.size(); ++g) CATCH_CHECK(torch::allclose(grads[g], expected_grads[g], 1e-4, 1e-5));
    // the terms: the static scheme's own bias, and the MLP's part
    const auto terms = dape.score_terms(q, k, {positions, 0, w, b});
    CATCH_REQUIRE(terms.size() == 2u);
    auto alibi = make_position_encoding("alibi", EncodingContext{H * Dh, H, 1, causal, "alibi"}, options_of("alibi"));
    CATCH_CHECK(torch::allclose(terms[0].value.expand_as(bias), alibi->score_bias(q, k, {positions, 0, w, b}).expand_as(bias)));
  }
  // the static bias's parameters train with the MLP (kerple's r1, r2)
  EncodingContext context{8, 2, 2, true, "dape"};
  DapeImpl kerple(context, options_of("dape"));
  const auto names = kerple.named_parameters();
  CATCH_CHECK((names.contains("static_bias.r1") && names.contains("static_bias.r2")));
  CATCH_CHECK((names.contains("mlp_in.1.weight") && names.contains("mlp_out.1.bias")));
}
