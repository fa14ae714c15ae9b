// Schemes whose position information depends on the tokens: FoX's forget gates (Lin et al.
// 2025), stick-breaking attention (Tan et al. 2024) and PaTH's Householder transport (Yang et
// al. 2025). Checked against the papers' formulas
// written as loops (values and gradients), by hand, and through the model.
#include "tests/catch.h"

#include <cmath>

#include "core/encodings/cope.h"
#include "core/encodings/fox.h"
#include "core/encodings/path.h"
#include "core/encodings/path_chunks.h"
#include "core/encodings/stick_breaking.h"
#include "core/encodings/registry.h"
#include "core/model/attention_mask.h"
#include "core/model/encoder.h"
#include "core/run/run.h"
#include "tests/support.h"

namespace pelab {

namespace {

// D_ij by the paper's sum, one term at a time: sum over the tokens l after the earlier of
// i, j up to the later of log sigmoid(w_h . x_l + b_h); causal: only j <= i (0 elsewhere).
// x: (B, T, D), weight: (H, D), bias: (H) -> (B, H, T, T)
torch::Tensor fox_by_the_sum(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool causal) {
  const int64_t B = x.size(0), T = x.size(1), H = weight.size(0);
  std::vector<torch::Tensor> values;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          torch::Tensor sum = torch::zeros({}, x.options());
          if (!causal || j <= i)
            for (int64_t l = std::min(i, j) + 1; l <= std::max(i, j); ++l)
              sum = sum + torch::log(torch::sigmoid((weight[h] * x[b][l]).sum() + bias[h]));
          values.push_back(sum);
        }
  return torch::stack(values).view({B, H, T, T});
}

}  // namespace

CATCH_TEST_CASE("fox: the bias is the sum of log forget gates between key and query, values and gradients",
                "[fox][schemes]") {
  torch::manual_seed(5);
  const int64_t B = 2, T = 5, D = 8, H = 2;
  for (bool causal : {true, false}) {
    CATCH_INFO((causal ? "causal" : "bidirectional"));
    OptionValues options = test::scheme_variant("fox", {{"init_std", 0.5}}).options;
    auto fox = make_position_encoding("fox", EncodingContext{D, H, 2, causal}, options);
    const auto x = torch::randn({B, T, D}, torch::requires_grad());
    const auto q = torch::randn({B, H, T, D / H});
    const auto positions = contiguous_positions(B, T);
    const torch::Tensor unused;
    const AttentionContext at{positions, 1, unused, unused, &x};
    const auto bias = fox->score_bias(q, q, at);
    auto parameters = fox->named_parameters();
    const auto weight = parameters["gates.1.weight"], gate_bias = parameters["gates.1.bias"];
    CATCH_REQUIRE(weight.sizes() == torch::IntArrayRef({H, D}));
    auto expected = fox_by_the_sum(x, weight, gate_bias, causal);
    const auto seen = causal ? torch::ones({T, T}).tril() : torch::ones({T, T});  // causal: the masked keys aside
    CATCH_CHECK(torch::allclose(bias * seen, expected, 1e-5, 1e-5));
    const auto weights = torch::randn({B, H, T, T}) * seen;
    const auto got = torch::autograd::grad({(bias * weights).sum()}, {x, weight, gate_bias}, {}, true);
    const auto want = torch::autograd::grad({(expected * weights).sum()}, {x, weight, gate_bias});
    for (size_t i = 0; i < got.size(); ++i) CATCH_CHECK(torch::allclose(got[i], want[i], 1e-4, 1e-5));
    // no positions are read: other positions, the same bias
    const auto shifted = Positions(positions.query + 7, positions.key + 7);
    CATCH_CHECK(torch::equal(fox->score_bias(q, q, AttentionContext{shifted, 1, unused, unused, &x}), bias));
    // without the block's input, a clear refusal
    CATCH_CHECK_THROWS_WITH(fox->score_bias(q, q, AttentionContext{positions, 1, unused, unused}),
                            Catch::Matchers::Contains("fox: the forget gates read the block's input"));
  }
}

CATCH_TEST_CASE("fox by hand: gates of 1/2 give log(1/2) per token between key and query", "[fox][schemes]") {
  // zero weights and biases: every f = sigmoid(0) = 1/2
  const int64_t T = 3, D = 4, H = 1;
  for (bool causal : {true, false}) {
    auto fox = make_position_encoding("fox", EncodingContext{D, H, 1, causal}, test::scheme_variant("fox", {}).options);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : fox->parameters()) p.zero_();
    }
    const auto x = torch::randn({1, T, D});
    const torch::Tensor unused;
    const auto positions = contiguous_positions(1, T);
    const auto bias = fox->score_bias(torch::zeros({1, H, T, 1}), torch::zeros({1, H, T, 1}),
                                      AttentionContext{positions, 0, unused, unused, &x})[0][0];
    const double h = std::log(0.5);
    CATCH_CHECK(bias[0][0].item<double>() == 0.0);
    CATCH_CHECK(bias[1][0].item<double>() == Approx(h));
    CATCH_CHECK(bias[2][0].item<double>() == Approx(2 * h));
    CATCH_CHECK(bias[2][1].item<double>() == Approx(h));
    if (!causal) CATCH_CHECK(bias[0][2].item<double>() == Approx(2 * h));  // symmetric
  }
}

CATCH_TEST_CASE("fox in the model: fused and unfused paths agree, padding appended changes nothing, mix trains",
                "[fox][schemes]") {
  torch::manual_seed(6);
  for (bool causal : {true, false}) {
    ModelConfig model;
    model.d_model = 16, model.num_heads = 2, model.num_layers = 2, model.d_ff = 32, model.causal = causal;
    EncodingConfig encoding{"fox", test::scheme_variant("fox", {{"init_std", 0.5}}).options};
    Encoder encoder(model, encoding, 5, 3);
    encoder->eval();
    const int64_t B = 2, T = 6;
    const auto tokens = torch::randint(1, 5, {B, T});
    const auto positions = contiguous_positions(B, T);
    torch::NoGradGuard no_grad;
    const auto fused = encoder->forward(tokens, {}, positions).logits;  // no maps asked: the fused kernel
    ForwardRequest maps;
    maps.attentions = true;
    const auto unfused = encoder->forward(tokens, {}, positions, {}, maps).logits;
    CATCH_CHECK(torch::allclose(fused, unfused, 1e-5, 1e-5));
    // three padding tokens appended: the real tokens' outputs stay
    const auto padded_tokens = torch::cat({tokens, torch::zeros({B, 3}, torch::kInt64)}, 1);
    const auto padded = encoder->forward(padded_tokens, padded_tokens.eq(0), contiguous_positions(B, T + 3)).logits;
    CATCH_CHECK(torch::allclose(padded.slice(1, 0, T), fused, 1e-5, 1e-5));
  }
}

namespace {

// A_ij = sigmoid(z_ij) prod_{j<k<i} (1 - sigmoid(z_ik)) over the drawn keys (before i, or up to
// it; not padding), one product at a time. z: (B, H, T, T); padding: (B, T) bool
torch::Tensor stick_breaking_by_the_product(const torch::Tensor& z, const torch::Tensor& padding, bool attend_current) {
  const int64_t B = z.size(0), H = z.size(1), T = z.size(2);
  std::vector<torch::Tensor> values;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          auto drawn = [&](int64_t key) { return (attend_current ? key <= i : key < i) && !padding[b][key].item<bool>(); };
          if (!drawn(j)) {
            values.push_back(torch::zeros({}, z.options()));
            continue;
          }
          torch::Tensor a = torch::sigmoid(z[b][h][i][j]);
          for (int64_t k = j + 1; k < T; ++k)
            if (drawn(k)) a = a * (1 - torch::sigmoid(z[b][h][i][k]));
          values.push_back(a);
        }
  return torch::stack(values).view({B, H, T, T});
}

}  // namespace

CATCH_TEST_CASE("stick-breaking: each key takes sigmoid(z) of what the nearer keys left, values and gradients",
                "[stick_breaking][schemes]") {
  torch::manual_seed(8);
  const int64_t B = 2, H = 2, T = 6;
  for (bool attend_current : {false, true}) {
    CATCH_INFO("attend_current " << attend_current);
    auto scheme = make_position_encoding("stick_breaking", EncodingContext{8, H, 1, true},
                                         test::scheme_variant("stick_breaking", {{"attend_current", attend_current}}).options);
    CATCH_REQUIRE(scheme->replaces_softmax());
    const auto z = (torch::randn({B, H, T, T}) * 2).requires_grad_();
    auto padding = torch::zeros({B, T}, torch::kBool);
    padding[1][T - 1] = true;
    const auto masked = padding.view({B, 1, 1, T}).expand({B, 1, T, T}).logical_or(
        torch::ones({T, T}, torch::kBool).triu(1));  // what the causal mask hides
    const auto positions = contiguous_positions(B, T);
    const torch::Tensor unused;
    const auto weights = scheme->attention_weights(z, masked, AttentionContext{positions, 0, unused, unused});
    const auto expected = stick_breaking_by_the_product(z, padding, attend_current);
    CATCH_CHECK(torch::allclose(weights, expected, 1e-5, 1e-6));
    CATCH_CHECK((weights.sum(-1) <= 1 + 1e-6).all().item<bool>());  // what is left goes nowhere
    const auto r = torch::randn({B, H, T, T});
    const auto got = torch::autograd::grad({(weights * r).sum()}, {z}, {}, true)[0];
    const auto want = torch::autograd::grad({(expected * r).sum()}, {z})[0];
    CATCH_CHECK(torch::allclose(got, want, 1e-4, 1e-6));
  }
}

CATCH_TEST_CASE("stick-breaking by hand: scores 0 give 1/2, 1/4, 1/8 from the nearest key back", "[stick_breaking][schemes]") {
  const auto z = torch::zeros({1, 1, 3, 3});
  auto before = make_position_encoding("stick_breaking", EncodingContext{8, 1, 1, true},
                                       test::scheme_variant("stick_breaking", {}).options);
  const auto positions = contiguous_positions(1, 3);
  const torch::Tensor none;
  const AttentionContext at{positions, 0, none, none};
  const auto w = before->attention_weights(z, none, at)[0][0];
  CATCH_CHECK(torch::allclose(w, torch::tensor({{0.0f, 0.0f, 0.0f}, {0.5f, 0.0f, 0.0f}, {0.25f, 0.5f, 0.0f}})));
  auto current = make_position_encoding("stick_breaking", EncodingContext{8, 1, 1, true},
                                        test::scheme_variant("stick_breaking", {{"attend_current", true}}).options);
  const auto c = current->attention_weights(z, none, at)[0][0];
  CATCH_CHECK(torch::allclose(c, torch::tensor({{0.5f, 0.0f, 0.0f}, {0.25f, 0.5f, 0.0f}, {0.125f, 0.25f, 0.5f}})));
  // bidirectional attention is refused, naming the scheme
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"encoding.name=stick_breaking"}),
                          Catch::Matchers::Contains("stick_breaking") && Catch::Matchers::Contains("causal"));
  CATCH_CHECK_NOTHROW(test::tiny_config({"encoding.name=stick_breaking", "model.causal=true", "task.format=causal_lm"}));
}

CATCH_TEST_CASE("stick-breaking's fused CPU kernel equals the weights on the scores (the reference), values and "
                "gradients",
                "[stick_breaking][schemes]") {
  const int64_t B = 2, H = 3, T = 40, Dh = 8;
  const double scale = 1.0 / std::sqrt(double(Dh));
  auto padding = torch::zeros({B, T}, torch::kBool);
  padding[1].narrow(0, T - 7, 7).fill_(true);
  for (bool attend_current : {false, true})
    for (const LocalAttention local : {LocalAttention{}, LocalAttention{9, 0}})
      for (double spread : {1.0, 12.0}) {  // 12: large scores, rows that use up their stick early
        CATCH_CAPTURE(attend_current, local.window, spread);
        torch::manual_seed(21);
        const auto q = (torch::randn({B, H, T, Dh}) * spread).requires_grad_();
        const auto k = torch::randn({B, H, T, Dh}).requires_grad_(), v = torch::randn({B, H, T, Dh}).requires_grad_();
        const AttentionMask mask = AttentionMask(padding, true).restricted(local);
        auto scheme = make_position_encoding(
            "stick_breaking", EncodingContext{H * Dh, H, 1, true},
            test::scheme_variant("stick_breaking", {{"attend_current", attend_current}}).options);
        const auto positions = contiguous_positions(B, T);
        const torch::Tensor unused;
        const AttentionContext at{positions, 0, unused, unused};
        const auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
        const auto expected = torch::matmul(scheme->attention_weights(scores, torch::isinf(mask.additive()), at), v);
        const auto got = scheme->attend(q, k, v, mask.kernel_mask(), at);
        CATCH_REQUIRE(got.defined());
        CATCH_CHECK(torch::allclose(got, expected, 1e-5, 1e-5));
        const auto r = torch::randn({B, H, T, Dh});
        const auto want = torch::autograd::grad({(expected * r).sum()}, {q, k, v});
        const auto have = torch::autograd::grad({(got * r).sum()}, {q, k, v});
        for (size_t g = 0; g < 3; ++g) CATCH_CHECK(torch::allclose(have[g], want[g], 1e-4, 1e-5));
      }
  // what the fused kernel is not for: other dtypes fall back to the weights on the scores
  auto scheme = make_position_encoding("stick_breaking", EncodingContext{8, 1, 1, true},
                                       test::scheme_variant("stick_breaking", {}).options);
  const auto positions = contiguous_positions(1, 4);
  const torch::Tensor unused;
  const auto q64 = torch::randn({1, 1, 4, 8}, torch::kFloat64);
  CATCH_CHECK_FALSE(scheme->attend(q64, q64, q64, {}, AttentionContext{positions, 0, unused, unused}).defined());
}

CATCH_TEST_CASE("cope's fused CPU attention equals the softmax over its unfused bias, values and gradients",
                "[cope][schemes]") {
  const int64_t B = 2, H = 2, Dh = 4;
  for (const bool causal : {true, false})
    for (const int64_t T : {int64_t{23}, int64_t{300}})  // 300: query rows in three blocks
      for (const int64_t npos : {int64_t{3}, int64_t{64}})  // 3: counts reach the clamp
        for (const LocalAttention local : {LocalAttention{}, LocalAttention{9, 0}}) {
          CATCH_CAPTURE(causal, T, npos, local.window);
          auto padding = torch::zeros({B, T}, torch::kBool);
          padding[1].narrow(0, T - 7, 7).fill_(true);
          const AttentionMask mask = AttentionMask(padding, causal).restricted(local);
          auto scheme = make_position_encoding(
              "cope", EncodingContext{H * Dh, H, 1, causal},
              test::scheme_variant("cope", {{"npos_max", npos}, {"init", std::string("normal")}}).options);
          auto& cope = *std::dynamic_pointer_cast<CopeImpl>(scheme.ptr());
          torch::manual_seed(npos + T + causal);
          const auto q = (torch::randn({B, H, T, Dh}) * 2).requires_grad_();
          const auto k = torch::randn({B, H, T, Dh}).requires_grad_(), v = torch::randn({B, H, T, Dh}).requires_grad_();
          const auto table = scheme->named_parameters()["table_0"];
          const auto positions = contiguous_positions(B, T);
          const torch::Tensor unused;
          const AttentionContext at{positions, 0, unused, unused};
          const auto scores = torch::matmul(q, k.transpose(-2, -1)) * cope.attention_scale() +
                              cope.unfused_bias(q, k, table) + mask.additive();
          const auto expected = torch::matmul(torch::softmax(scores, -1), v);
          const auto got = scheme->attend(q, k, v, mask.kernel_mask(), at);
          CATCH_REQUIRE(got.defined());
          CATCH_CHECK(torch::allclose(got, expected, 1e-5, 1e-5));
          const auto r = torch::randn({B, H, T, Dh});
          const auto want = torch::autograd::grad({(expected * r).sum()}, {q, k, v, table});
          const auto have = torch::autograd::grad({(got * r).sum()}, {q, k, v, table});
          for (size_t g = 0; g < want.size(); ++g) {  // to float precision of the largest (the table's sums B H T^2 terms)
            CATCH_CAPTURE(g);
            CATCH_CHECK((have[g] - want[g]).abs().max().item<double>() <= 2e-5 * want[g].abs().max().item<double>());
          }
        }
  // other dtypes are left to the hooks
  auto scheme = make_position_encoding("cope", EncodingContext{8, 1, 1, true}, test::scheme_variant("cope", {}).options);
  const auto positions = contiguous_positions(1, 4);
  const torch::Tensor unused;
  const auto q64 = torch::randn({1, 1, 4, 8}, torch::kFloat64);
  CATCH_CHECK_FALSE(scheme->attend(q64, q64, q64, {}, AttentionContext{positions, 0, unused, unused}).defined());
}

namespace {

// q_i^T H_i H_{i-1} ... H_{j+1} k_j with H_s = I - beta_s w_s w_s^T, one matrix product at a
// time (0 above the diagonal). q, k, w: (B, H, T, Dh); beta: (B, H, T)
torch::Tensor path_by_the_product(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                                  const torch::Tensor& beta) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3);
  std::vector<torch::Tensor> values;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          if (j > i) {
            values.push_back(torch::zeros({}));
            continue;
          }
          torch::Tensor transport = torch::eye(Dh);
          for (int64_t s = j + 1; s <= i; ++s)  // H_s on the left of what came before
            transport = torch::matmul(torch::eye(Dh) - beta[b][h][s] * torch::outer(w[b][h][s], w[b][h][s]), transport);
          values.push_back(torch::dot(q[b][h][i], torch::mv(transport, k[b][h][j])));
        }
  return torch::stack(values).view({B, H, T, T});
}

}  // namespace

CATCH_TEST_CASE("path: scores are q_i H_i ... H_(j+1) k_j, values and gradients, and the bias adds just that",
                "[path][schemes]") {
  torch::manual_seed(10);
  const int64_t B = 2, H = 2, T = 5, Dh = 3, D = H * Dh;
  const auto q = torch::randn({B, H, T, Dh}, torch::requires_grad());
  const auto k = torch::randn({B, H, T, Dh}, torch::requires_grad());
  const auto raw = torch::randn({B, H, T, Dh}, torch::requires_grad());
  const auto w = raw / raw.norm(2, -1, true);
  const auto beta = (2 * torch::sigmoid(torch::randn({B, H, T}))).requires_grad_();
  const auto got = PathImpl::transported_products(q, k, w, beta);
  const auto want = path_by_the_product(q, k, w, beta);
  CATCH_CHECK(torch::allclose(got, want, 1e-5, 1e-5));
  const auto r = torch::randn({B, H, T, T});
  const auto g1 = torch::autograd::grad({(got * r).sum()}, {q, k, raw, beta}, {}, true);
  const auto g2 = torch::autograd::grad({(want * r).sum()}, {q, k, raw, beta});
  for (size_t i = 0; i < g1.size(); ++i) CATCH_CHECK(torch::allclose(g1[i], g2[i], 1e-4, 1e-5));
  // through the scheme: the bias is scale * (transported - plain) below the diagonal
  auto path = make_position_encoding("path", EncodingContext{D, H, 1, true}, test::scheme_variant("path", {}).options);
  auto& impl = *std::dynamic_pointer_cast<PathImpl>(path.ptr());
  const auto x = torch::randn({B, T, D});
  const auto positions = contiguous_positions(B, T);
  const torch::Tensor unused;
  const AttentionContext at{positions, 0, unused, unused, &x};
  const auto bias = path->score_bias(q, k, at);
  const auto [w_x, beta_x] = impl.transformations(x, 0);
  CATCH_CHECK(torch::allclose(w_x.norm(2, -1), torch::ones({B, H, T}), 1e-5, 1e-6));
  CATCH_CHECK(((beta_x > 0) & (beta_x < 2)).all().item<bool>());
  const auto expected = (path_by_the_product(q, k, w_x, beta_x) - torch::matmul(q, k.transpose(-2, -1)).tril()) /
                        std::sqrt(static_cast<double>(Dh));
  CATCH_CHECK(torch::allclose(bias, expected, 1e-5, 1e-5));
  CATCH_CHECK_THROWS_WITH(path->score_bias(q, k, AttentionContext{positions, 0, unused, unused}),
                          Catch::Matchers::Contains("path: the transformations read the block's input"));
}

namespace {

// Random PaTH inputs of (B, H, T, Dh): q, k, raw and beta leaves, w = raw / |raw|, beta in (0, 2)
struct RandomPath {
  torch::Tensor q, k, raw, w, beta;
};
RandomPath random_path(int64_t B, int64_t H, int64_t T, int64_t Dh) {
  RandomPath r;
  r.q = torch::randn({B, H, T, Dh}, torch::requires_grad());
  r.k = torch::randn({B, H, T, Dh}, torch::requires_grad());
  r.raw = torch::randn({B, H, T, Dh}, torch::requires_grad());
  r.w = r.raw / r.raw.norm(2, -1, true);
  r.beta = (2 * torch::sigmoid(torch::randn({B, H, T}))).requires_grad_();
  return r;
}

// bias(q, k, w, beta, scale) against carrying every key through every step: values, and the
// gradients of q, k, raw and beta
template <class Bias>
void check_bias_against_reference(const Bias& bias, int64_t T, int64_t Dh) {
  const int64_t B = 2, H = 3;
  const auto in = random_path(B, H, T, Dh);
  const double scale = 0.7;
  const auto got = bias(in.q, in.k, in.w, in.beta, scale);
  const auto reference =
      (PathImpl::transported_products(in.q, in.k, in.w, in.beta) - torch::matmul(in.q, in.k.transpose(-2, -1)).tril()) *
      scale;
  CATCH_CHECK(got.sizes() == reference.sizes());
  CATCH_CHECK(torch::allclose(got, reference, 1e-4, 1e-5));
  const auto r = torch::randn({B, H, T, T});
  const auto g1 = torch::autograd::grad({(got * r).sum()}, {in.q, in.k, in.raw, in.beta}, {}, true);
  const auto g2 = torch::autograd::grad({(reference * r).sum()}, {in.q, in.k, in.raw, in.beta});
  for (size_t i = 0; i < g1.size(); ++i) CATCH_CHECK(torch::allclose(g1[i], g2[i], 1e-3, 1e-4));
}

}  // namespace

CATCH_TEST_CASE("path's CPU bias equals carrying every key through every step, values and gradients",
                "[path][schemes]") {
  for (const int64_t T : {1, 7, 33, 70}) {  // the row kernels, then chunks of 32 (the last one padded)
    CATCH_CAPTURE(T);
    torch::manual_seed(T);
    check_bias_against_reference(PathImpl::bias_of, T, 5);
  }
}

CATCH_TEST_CASE("path's chunked form equals carrying every key through every step, values and gradients",
                "[path][schemes]") {
  // T not a multiple of the chunk (padding), one chunk, chunks of 1 (no inside part), Dh above
  // and below the chunk, and a longer sequence where errors of the triangular solves would add up
  struct Case {
    int64_t T, Dh, chunk;
  };
  for (const auto [T, Dh, chunk] : {Case{1, 5, 4}, Case{7, 5, 4}, Case{7, 5, 64}, Case{9, 3, 1}, Case{33, 5, 8},
                                    Case{30, 2, 16}, Case{150, 8, 32}}) {
    CATCH_CAPTURE(T, Dh, chunk);
    torch::manual_seed(T + chunk);
    check_bias_against_reference(
        [chunk = chunk](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, const torch::Tensor& beta,
                        double scale) { return PathImpl::chunked_bias(q, k, w, beta, scale, chunk); },
        T, Dh);
  }
  CATCH_CHECK_THROWS_WITH(PathImpl::chunked_bias(torch::zeros({1, 1, 2, 2}), torch::zeros({1, 1, 2, 2}),
                                                 torch::zeros({1, 1, 2, 2}), torch::zeros({1, 1, 2}), 1.0, 0),
                          Catch::Matchers::Contains("path: the chunk size must be positive"));
}

CATCH_TEST_CASE("path's chunked CPU kernels equal carrying every key through every step, values and gradients",
                "[path][schemes]") {
  struct Case {
    int64_t T, Dh, chunk;
  };
  for (const auto [T, Dh, chunk] : {Case{1, 4, 64}, Case{7, 5, 3}, Case{8, 3, 4}, Case{9, 3, 1}, Case{33, 5, 8},
                                    Case{30, 2, 16}, Case{100, 8, 16}, Case{130, 16, 64}}) {
    CATCH_CAPTURE(T, Dh, chunk);
    torch::manual_seed(T * chunk);
    const int64_t B = 2, H = 2;
    const auto in = random_path(B, H, T, Dh);
    const auto &q = in.q, &k = in.k, &beta = in.beta;
    const auto w = in.w.detach().requires_grad_();  // a leaf: the kernels' gradient is w's own
    const double scale = 0.6;
    const auto reference =
        (PathImpl::transported_products(q, k, w, beta) - torch::matmul(q, k.transpose(-2, -1)).tril()) * scale;
    const auto fused = path_chunks::bias_forward(q.detach(), k.detach(), w.detach(), beta.detach(), scale, chunk);
    CATCH_CHECK(torch::allclose(fused, reference, 1e-4, 1e-5));
    // the gradient of sum(bias * r); r above the diagonal must not matter (masked keys)
    const auto r = torch::randn({B, H, T, T});
    const auto want = torch::autograd::grad({(reference * r).sum()}, {q, k, w, beta});
    const auto got = path_chunks::bias_backward(q.detach(), k.detach(), w.detach(), beta.detach(),
                                                r + torch::ones({T, T}).triu() * 100, scale, chunk);
    for (size_t i = 0; i < got.size(); ++i) {
      CATCH_CAPTURE(i);
      CATCH_CHECK(torch::allclose(got[i], want[i], 1e-3, 1e-4));
    }
  }
}

CATCH_TEST_CASE("path's own CPU attention equals softmax of the transported scores, values and gradients",
                "[path][schemes]") {
  struct Case {
    int64_t T, Dh, chunk;
    bool padding, band;
  };
  for (const auto [T, Dh, chunk, padding, band] : {Case{1, 4, 32, false, false}, Case{7, 5, 3, true, false},
                                                   Case{9, 3, 1, false, true}, Case{33, 5, 8, true, true},
                                                   Case{70, 8, 32, true, false}, Case{130, 16, 64, false, false}}) {
    CATCH_CAPTURE(T, Dh, chunk, padding, band);
    torch::manual_seed(T * chunk + 1);
    const int64_t B = 2, H = 2;
    const auto in = random_path(B, H, T, Dh);
    const auto &q = in.q, &k = in.k, &beta = in.beta;
    const auto w = in.w.detach().requires_grad_();
    const auto v = torch::randn({B, H, T, Dh}, torch::requires_grad());
    const double scale = 0.6;
    // padding: the last two keys of batch element 1 masked, (B, 1, 1, T); band: keys more than
    // 3 back masked, (1, 1, T, T)
    torch::Tensor mask;
    if (padding) {
      mask = torch::zeros({B, 1, 1, T});
      mask[1].narrow(-1, std::max<int64_t>(T - 2, 1), std::min<int64_t>(2, T - 1)).fill_(-INFINITY);
    }
    if (band) {
      const auto i = torch::arange(T).view({T, 1}), j = torch::arange(T).view({1, T});
      const auto far = torch::where(i - j > 3, torch::full({}, -INFINITY), torch::zeros({})).view({1, 1, T, T});
      mask = mask.defined() ? mask + far : far;
    }
    const auto causal = torch::ones({T, T}, torch::kBool).triu(1);
    auto logits = (PathImpl::transported_products(q, k, w, beta) * scale).masked_fill(causal, -INFINITY);
    if (mask.defined()) logits = logits + mask;
    const auto reference = torch::matmul(torch::softmax(logits, -1), v);
    const auto [out, lse] = path_chunks::attention_forward(q.detach(), k.detach(), v.detach(), w.detach(), beta.detach(),
                                                           mask, scale, chunk);
    CATCH_CHECK(torch::allclose(out, reference, 1e-4, 1e-5));
    CATCH_CHECK(torch::allclose(lse, torch::logsumexp(logits, -1), 1e-4, 1e-5));
    const auto r = torch::randn({B, H, T, Dh});
    const auto want = torch::autograd::grad({(reference * r).sum()}, {q, k, v, w, beta});
    const auto got = path_chunks::attention_backward(q.detach(), k.detach(), v.detach(), w.detach(), beta.detach(),
                                                     mask, out, lse, r, scale, chunk);
    for (size_t i = 0; i < got.size(); ++i) {
      CATCH_CAPTURE(i);
      CATCH_CHECK(torch::allclose(got[i], want[i], 1e-3, 1e-4));
    }
  }
  // a query whose every key is masked attends to nothing: 0, as the fused kernels give
  const auto none_seen = torch::full({1, 1, 1, 2}, -INFINITY);
  const auto x = torch::randn({1, 1, 2, 3});
  const auto [out, lse] = path_chunks::attention_forward(x, x, x, x / x.norm(2, -1, true), torch::ones({1, 1, 2}),
                                                         none_seen, 1.0, 32);
  CATCH_CHECK(out.abs().max().item<float>() == 0.0f);
  CATCH_CHECK(std::isinf(lse[0][0][0].item<float>()));
}

CATCH_TEST_CASE("path's attend hook runs its own attention from 64 tokens on, as the bias would give",
                "[path][schemes]") {
  const int64_t B = 2, H = 2, Dh = 4, D = H * Dh;
  auto scheme = make_position_encoding("path", EncodingContext{D, H, 1, true}, test::scheme_variant("path", {}).options);
  const torch::Tensor unused;
  for (const int64_t T : {int64_t{63}, int64_t{100}}) {
    CATCH_CAPTURE(T);
    torch::manual_seed(T);
    auto padding = torch::zeros({B, T}, torch::kBool);
    padding[1].narrow(0, T - 7, 7).fill_(true);
    const AttentionMask mask(padding, true);
    const auto q = torch::randn({B, H, T, Dh}, torch::requires_grad()), k = torch::randn({B, H, T, Dh}, torch::requires_grad());
    const auto v = torch::randn({B, H, T, Dh}, torch::requires_grad());
    const auto x = torch::randn({B, T, D});
    const auto positions = contiguous_positions(B, T);
    const AttentionContext at{positions, 0, unused, unused, &x};
    const auto got = scheme->attend(q, k, v, mask.kernel_mask(), at);
    CATCH_CHECK(got.defined() == (T >= 64));  // below: the bias and the fused attention
    if (!got.defined()) continue;
    const auto scores = torch::matmul(q, k.transpose(-2, -1)) * scheme->attention_scale() + scheme->score_bias(q, k, at) +
                        mask.additive();
    const auto expected = torch::matmul(torch::softmax(scores, -1), v);
    CATCH_CHECK(torch::allclose(got, expected, 1e-4, 1e-5));
    const auto r = torch::randn({B, H, T, Dh});
    std::vector<torch::Tensor> inputs = {q, k, v};
    for (const auto& p : scheme->parameters()) inputs.push_back(p);
    const auto want = torch::autograd::grad({(expected * r).sum()}, inputs, {}, /*retain_graph=*/true, false, true);
    const auto have = torch::autograd::grad({(got * r).sum()}, inputs, {}, true, false, true);
    for (size_t g = 0; g < want.size(); ++g) {
      CATCH_CAPTURE(g);
      if (!want[g].defined()) continue;  // the other blocks' projections
      CATCH_CHECK(torch::allclose(have[g], want[g], 1e-3, 1e-4));
    }
  }
}

CATCH_TEST_CASE("path by hand: a projection away from e0 leaves (1, 1) . (0, 1) = 1 for every earlier key",
                "[path][schemes]") {
  // w_t = e0 and beta_t = 1 for every token: H = I - e0 e0^T, idempotent; q = k = (1, 1)
  const int64_t T = 4;
  const auto q = torch::ones({1, 1, T, 2});
  const auto w = torch::zeros({1, 1, T, 2}).index_put_({torch::indexing::Ellipsis, 0}, 1.0);
  const auto products = PathImpl::transported_products(q, q, w, torch::ones({1, 1, T}))[0][0];
  CATCH_CHECK(torch::allclose(products, torch::tensor({{2.0f, 0.0f, 0.0f, 0.0f},
                                                       {1.0f, 2.0f, 0.0f, 0.0f},
                                                       {1.0f, 1.0f, 2.0f, 0.0f},
                                                       {1.0f, 1.0f, 1.0f, 2.0f}})));
  // beta 2, w = e0: a reflection, its own inverse: keys two steps back are untouched
  const auto reflected = PathImpl::transported_products(q, q, w, torch::full({1, 1, T}, 2.0))[0][0];
  CATCH_CHECK(reflected[1][0].item<float>() == 0.0f);  // (1, 1) . (-1, 1)
  CATCH_CHECK(reflected[2][0].item<float>() == 2.0f);
}

CATCH_TEST_CASE("path direction_bias: false drops the direction projection's bias, as fla's w_proj", "[path][schemes]") {
  auto task = test::default_task("reverse_string", "causal_lm");
  for (const bool bias : {true, false}) {
    CATCH_INFO("direction_bias " << bias);
    const RunConfig config = test::tiny_config({"model.causal=true", "task.format=causal_lm", "encoding.name=path",
                                                std::string("encoding.direction_bias=") + (bias ? "true" : "false")});
    Encoder model = build_model(config, *task);
    const auto parameters = model->named_parameters();
    CATCH_CHECK(parameters.contains("position_encoding.directions.0.weight"));
    CATCH_CHECK(parameters.contains("position_encoding.directions.0.bias") == bias);
    CATCH_CHECK(parameters.contains("position_encoding.strengths.0.bias"));  // the strengths keep theirs (as b_proj)
  }
}

CATCH_TEST_CASE("the new schemes under encoding_mix: every other block RoPE, forward and every parameter trained",
                "[fox][stick_breaking][path][fope][mix]") {
  torch::manual_seed(12);
  auto task = test::default_task("reverse_string", "causal_lm");
  for (const std::string scheme : {"fox", "stick_breaking", "path", "fope"}) {
    CATCH_INFO(scheme);
    const RunConfig config = test::tiny_config({"model.causal=true", "task.format=causal_lm", "encoding.name=rope",
                                                "encoding_mix.name=" + scheme, "encoding_mix.every=2",
                                                "model.num_layers=2"});
    Encoder model = build_model(config, *task);
    Rng rng(3);
    const Batch b = task->sample(3, 6, rng);
    const int64_t T = b.tokens.size(1);
    ForwardRequest request;
    request.attentions = true;
    const auto out = model->forward(b.tokens, b.padding, contiguous_positions(3, T), b.segments, request);
    CATCH_CHECK(torch::isfinite(out.logits).all().item<bool>());
    for (const auto& a : out.attentions) CATCH_CHECK(a.triu(1).abs().max().item<float>() == 0.0f);
    (out.logits * torch::randn_like(out.logits)).sum().backward();
    for (const auto& p : model->named_parameters())
      if (p.key().find("mixed.") != std::string::npos) {  // the scheme's own parameters, block 1 only
        CATCH_INFO(p.key());
        CATCH_CHECK(p.key().find(".0.") == std::string::npos);  // block 0 is RoPE's: nothing of the scheme there
        CATCH_CHECK(p.value().grad().defined());
        CATCH_CHECK(p.value().grad().abs().sum().item<float>() > 0.0f);
      }
  }
}

}  // namespace pelab
