// Rotary schemes, position samplers and evaluation-time extrapolation.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/encodings/position_sampler.h"
#include "core/encodings/registry.h"
#include "core/encodings/fope.h"
#include "core/encodings/rope.h"
#include "core/encodings/xpos.h"
#include "core/run/run.h"
#include "data/task_registry.h"
#include "tests/support.h"

using namespace pelab;

namespace {

RopeImpl make_rope(int64_t head_dim, const std::string& layout, double fraction = 1.0) {
  auto options = OptionValues::defaults(RopeImpl::options());
  options.set("layout", layout);
  options.set("rotary_fraction", fraction);
  return RopeImpl(EncodingContext{head_dim, 1, 1, false}, options);
}

torch::Tensor at_positions(const std::vector<int64_t>& p) { return torch::tensor(p, torch::kInt64).unsqueeze(0); }

bool close(const torch::Tensor& a, const torch::Tensor& b, double tolerance = 1e-5) {
  return torch::allclose(a, b, tolerance, tolerance);
}

}  // namespace

CATCH_TEST_CASE("RoPE golden values: q = [1, 0, 0, 0] at position 1, both layouts", "[rotary][rope]") {
  auto q = torch::tensor({1.0f, 0.0f, 0.0f, 0.0f}).view({1, 1, 1, 4});
  auto interleaved = make_rope(4, "interleaved").apply(q, at_positions({1})).flatten();
  auto half = make_rope(4, "half").apply(q, at_positions({1})).flatten();
  const std::vector<float> expect_interleaved = {0.5403f, 0.8415f, 0.0f, 0.0f};
  const std::vector<float> expect_half = {0.5403f, 0.0f, 0.8415f, 0.0f};
  for (int i = 0; i < 4; ++i) {
    CATCH_CHECK(interleaved[i].item<float>() == Approx(expect_interleaved[i]).margin(1e-4));
    CATCH_CHECK(half[i].item<float>() == Approx(expect_half[i]).margin(1e-4));
  }
  // the second pair turns at base^(-2/4) = 1/100 per position
  auto q2 = torch::tensor({0.0f, 0.0f, 1.0f, 0.0f}).view({1, 1, 1, 4});
  auto turned = make_rope(4, "interleaved").apply(q2, at_positions({3})).flatten();
  CATCH_CHECK(turned[2].item<float>() == Approx(std::cos(0.03)).margin(1e-6));
  CATCH_CHECK(turned[3].item<float>() == Approx(std::sin(0.03)).margin(1e-6));
}

CATCH_TEST_CASE("RoPE: scores depend only on the offset, norms are preserved", "[rotary][rope]") {
  torch::manual_seed(1);
  for (const std::string layout : {"interleaved", "half"}) {
    CATCH_INFO(layout);
    auto rope = make_rope(8, layout);
    auto q = torch::randn({1, 1, 5, 8}), k = torch::randn({1, 1, 5, 8});
    auto p = at_positions({0, 1, 2, 3, 4}), shifted = at_positions({100, 101, 102, 103, 104});
    auto scores = torch::matmul(rope.apply(q, p), rope.apply(k, p).transpose(-2, -1));
    auto shifted_scores = torch::matmul(rope.apply(q, shifted), rope.apply(k, shifted).transpose(-2, -1));
    CATCH_CHECK(close(scores, shifted_scores, 1e-4));
    CATCH_CHECK(close(rope.apply(q, p).norm(2, -1), q.norm(2, -1)));
  }
}

CATCH_TEST_CASE("RoPE rotary_fraction rotates only the first part of each head", "[rotary][rope]") {
  auto rope = make_rope(8, "interleaved", 0.5);
  CATCH_CHECK(rope.rotary_dims() == 4);
  auto x = torch::randn({1, 2, 3, 8});
  auto y = rope.apply(x, at_positions({5, 6, 7}));
  CATCH_CHECK(torch::equal(y.narrow(-1, 4, 4), x.narrow(-1, 4, 4)));
  CATCH_CHECK_FALSE(close(y.narrow(-1, 0, 4), x.narrow(-1, 0, 4)));
  // fewer than two dimensions: refused, naming the option and its least value
  CATCH_CHECK_THROWS_WITH(make_rope(8, "interleaved", 0.2),
                          test::ContainsText("rope: rotary_fraction 0.2 rotates no pair of the head's 8 dimensions; "
                                             "it must be at least 0.25"));
  CATCH_CHECK(make_rope(8, "interleaved", 0.25).rotary_dims() == 2);
}

namespace {

// x rotated as a loop over pairs (interleaved): pair i by position p * theta[i], the rest kept.
torch::Tensor rotated_by_loop(const torch::Tensor& x, const std::vector<int64_t>& positions,
                              const std::vector<double>& theta) {
  auto y = x.clone();
  for (int64_t t = 0; t < x.size(2); ++t)
    for (size_t i = 0; i < theta.size(); ++i) {
      const double angle = positions[t] * theta[i];
      const auto x1 = x.select(2, t).select(-1, 2 * i), x2 = x.select(2, t).select(-1, 2 * i + 1);
      y.select(2, t).select(-1, 2 * i).copy_(x1 * std::cos(angle) - x2 * std::sin(angle));
      y.select(2, t).select(-1, 2 * i + 1).copy_(x1 * std::sin(angle) + x2 * std::cos(angle));
    }
  return y;
}

}  // namespace

CATCH_TEST_CASE("p-RoPE and HoPE: the head's highest frequencies, and no rotation for pairs slower than a turn",
                "[rotary][rope]") {
  torch::manual_seed(4);
  auto x = torch::randn({1, 2, 5, 8});
  const std::vector<int64_t> p = {0, 3, 7, 50, 400};
  auto rope_with = [](std::vector<std::pair<std::string, OptionValue>> set) {
    auto options = OptionValues::defaults(RopeImpl::options());
    for (const auto& [name, value] : set) options.set(name, value);
    return RopeImpl(EncodingContext{8, 1, 1, false}, options);
  };
  // p-RoPE, p = 0.5 of Dh = 8: pairs 0 and 1 at 10000^(-0/8), 10000^(-2/8); pairs 2, 3 kept
  auto p_rope = rope_with({{"rotary_fraction", 0.5}, {"spectrum", std::string("head")}});
  CATCH_CHECK(close(p_rope.apply(x, at_positions(p)), rotated_by_loop(x, p, {1.0, std::pow(1e4, -0.25)})));
  // rotary_fraction alone spreads the whole spectrum over the rotated pairs: 10000^(-2/4) for pair 1
  auto fraction = rope_with({{"rotary_fraction", 0.5}});
  CATCH_CHECK(close(fraction.apply(x, at_positions(p)), rotated_by_loop(x, p, {1.0, 1e-2})));
  // HoPE with L = 64: theta_i = 1, 0.1, 0.01, 0.001; 0.1 x 64 >= 2 pi turns, 0.01 x 64 does not
  auto hope = rope_with({{"min_turn_length", 64.0}});
  CATCH_CHECK(close(hope.apply(x, at_positions(p)), rotated_by_loop(x, p, {1.0, 0.1, 0.0, 0.0})));
  CATCH_CHECK(close(rope_with({}).apply(x, at_positions(p)), rotated_by_loop(x, p, {1.0, 0.1, 0.01, 0.001}), 1e-4));
  // gradients as the loop's
  auto xg = x.clone().requires_grad_(true), xl = x.clone().requires_grad_(true);
  (hope.apply(xg, at_positions(p)) * torch::arange(80).view({1, 2, 5, 8})).sum().backward();
  (rotated_by_loop(xl, p, {1.0, 0.1, 0.0, 0.0}) * torch::arange(80).view({1, 2, 5, 8})).sum().backward();
  CATCH_CHECK(close(xg.grad(), xl.grad(), 1e-4));
}

CATCH_TEST_CASE("RoPE's one-pass float32 rotation equals LibTorch's operations, values and gradients",
                "[rotary][rope]") {
  // both layouts, a partly rotated head, positions shared by the batch or per row, and q as
  // attention passes it (a (B, H, T, Dh) view of (B, T, H, Dh) memory); the reference is
  // the same rotation as LibTorch operations in float64 (the path other dtypes take)
  struct Case {
    std::string layout;
    double fraction;
    bool per_row;
  };
  for (const auto& c : std::vector<Case>{{"interleaved", 1.0, false}, {"half", 1.0, true}, {"interleaved", 0.5, true},
                                         {"half", 0.75, false}}) {
    CATCH_CAPTURE(c.layout, c.fraction, c.per_row);
    auto rope = make_rope(8, c.layout, c.fraction);
    const int64_t B = 3, H = 2, T = 37;
    torch::manual_seed(1);
    auto x = torch::randn({B, T, H, 8}).transpose(1, 2).detach().requires_grad_();
    auto positions = c.per_row ? torch::randint(0, 500, {B, T}, torch::kInt64)
                               : torch::arange(T, torch::kInt64).unsqueeze(0).expand({B, T});
    auto y = rope.apply(x, positions);
    CATCH_CHECK(y.stride(-1) == 1);
    auto x64 = x.detach().to(torch::kFloat64).requires_grad_();
    auto expected = rope.apply(x64, positions);
    CATCH_CHECK(torch::allclose(y.to(torch::kFloat64), expected, 1e-6, 1e-6));
    auto grad = torch::randn({B, H, T, 8});
    y.backward(grad);
    expected.backward(grad.to(torch::kFloat64));
    CATCH_CHECK(torch::allclose(x.grad().to(torch::kFloat64), x64.grad(), 1e-6, 1e-6));
    // the rotation keeps norms, so its gradient is the rotation back: |dx| = |dy| per pair
    CATCH_CHECK(torch::allclose(x.grad().norm(2, -1), grad.norm(2, -1), 1e-5, 1e-5));
  }
}

CATCH_TEST_CASE("RoPE in bfloat16 (autocast) rotates by float32 angles, rounded only as cosines and sines",
                "[rotary][rope]") {
  torch::manual_seed(3);
  auto rope = make_rope(8, "interleaved");
  auto x = torch::randn({1, 2, 1048, 8}).to(torch::kBFloat16);  // (B, H, T, Dh)
  auto positions = torch::arange(1000, 2048, torch::kInt64).unsqueeze(0);
  // LibTorch's operations in bfloat16 against the float32 one-pass rotation of the same values;
  // bfloat16 spaces numbers in [1024, 2048) by 8, so angles rounded before cos and sin miss
  // by up to 4 radians
  auto y = rope.apply(x, positions);
  CATCH_REQUIRE(y.scalar_type() == torch::kBFloat16);
  auto expected = rope.apply(x.to(torch::kFloat32), positions);
  const double error = (y.to(torch::kFloat32) - expected).abs().max().item<double>();
  CATCH_CHECK(error < 0.05);
}

CATCH_TEST_CASE("extrapolation: interpolation at scale 1 is plain RoPE, scale s divides positions, NTK scales the base",
                "[rotary][rope]") {
  auto rope = make_rope(8, "interleaved");
  auto x = torch::randn({1, 1, 4, 8});
  auto p = at_positions({0, 3, 8, 20});
  auto plain = rope.apply(x, p);
  rope.set_extrapolation({"interpolation", 1.0});
  CATCH_CHECK(torch::equal(rope.apply(x, p), plain));
  // interpolation by 2: the angles are those of half the positions
  auto angles = [&](RopeImpl& r, const torch::Tensor& positions) { return r.angles(positions); };
  rope.set_extrapolation({"interpolation", 2.0});
  CATCH_CHECK(close(angles(rope, at_positions({4, 10})), make_rope(8, "interleaved").angles(at_positions({2, 5}))));
  // NTK by 2 on R = 8: base 10000 * 2^(8/6); the lowest frequency pair turns at base'^(-6/8)
  rope.set_extrapolation({"ntk", 2.0});
  const double base = 10000.0 * std::pow(2.0, 8.0 / 6.0);
  auto a = angles(rope, at_positions({100}))[0][0];
  CATCH_CHECK(a[0].item<float>() == Approx(100.0));
  CATCH_CHECK(a[3].item<float>() == Approx(100.0 * std::pow(base, -6.0 / 8.0)).epsilon(1e-5));
  // a scale below 1 (a test length shorter than training) leaves positions alone
  rope.set_extrapolation({"interpolation", 0.5});
  CATCH_CHECK(torch::equal(rope.apply(x, p), plain));
  CATCH_CHECK_THROWS_WITH(rope.set_extrapolation({"linear", 2.0}), test::ContainsText("unknown extrapolation method 'linear'"));
  CATCH_CHECK_THROWS_WITH(rope.set_extrapolation({"yarn", 2.0}), test::ContainsText("yarn needs the training length"));
}

CATCH_TEST_CASE("YaRN: NTK-by-parts frequencies and temperature of Peng et al. (R = 8)", "[rotary][rope]") {
  auto rope = make_rope(8, "interleaved");
  const double b = 10000.0;
  // L = 16, s = 4: d(32) = 8 ln(16 / 64 pi) / (2 ln b) < 0 -> low 0; d(1) = 0.41 -> high 1: the
  // ramp is (0, 1, 1, 1), so pair 0 keeps its frequency and the others are divided by s
  rope.set_extrapolation({"yarn", 4.0, 16});
  auto theta = rope.inverse_frequencies();
  const std::vector<double> short_context = {1.0, std::pow(b, -0.25) / 4, std::pow(b, -0.5) / 4, std::pow(b, -0.75) / 4};
  for (int i = 0; i < 4; ++i) CATCH_CHECK(theta[i].item<double>() == Approx(short_context[i]));
  CATCH_CHECK(rope.rotation_magnitude() == Approx(0.1 * std::log(4.0) + 1));  // 1.1386
  // L = 2048: d(32) = 1.008 -> low 1, d(1) = 2.513 -> high 3: the ramp is (0, 0, 0.5, 1), so
  // pairs 0 and 1 are kept, pair 2 half interpolated, pair 3 interpolated
  rope.set_extrapolation({"yarn", 4.0, 2048});
  theta = rope.inverse_frequencies();
  const std::vector<double> long_context = {1.0, std::pow(b, -0.25), 0.5 * std::pow(b, -0.5) * (1 + 0.25),
                                            std::pow(b, -0.75) / 4};
  for (int i = 0; i < 4; ++i) CATCH_CHECK(theta[i].item<double>() == Approx(long_context[i]));
  // the temperature: rotation scales every pair by 0.1 ln s + 1, so q.k by its square
  auto x = torch::randn({1, 1, 3, 8});
  auto p = at_positions({0, 5, 9});
  auto rotated = rope.apply(x, p);
  CATCH_CHECK(close(rotated.norm(2, -1), x.norm(2, -1) * (0.1 * std::log(4.0) + 1), 1e-4));
  // at s = 1 (a test length within training) YaRN is plain RoPE
  rope.set_extrapolation({"yarn", 1.0, 2048});
  CATCH_CHECK(close(rope.apply(x, p), make_rope(8, "interleaved").apply(x, p)));
}

CATCH_TEST_CASE("dynamic NTK: base x (alpha T / L - alpha + 1)^(R / (R - 2)), alpha = 1 is ntk", "[rotary][rope]") {
  auto rope = make_rope(8, "interleaved");
  // alpha 2 (the default), L = 16, T = 64: base x 7^(8/6)
  rope.set_extrapolation({"dynamic_ntk", 4.0, 16});
  const double base = 10000.0 * std::pow(7.0, 8.0 / 6.0);
  auto theta = rope.inverse_frequencies();
  for (int i = 0; i < 4; ++i) CATCH_CHECK(theta[i].item<double>() == Approx(std::pow(base, -2.0 * i / 8)));
  CATCH_CHECK(rope.rotation_magnitude() == 1.0);
  auto options = OptionValues::defaults(RopeImpl::options());
  options.set("dynamic_ntk_factor", 1.0);
  RopeImpl alpha_one(EncodingContext{8, 1, 1, false}, options), ntk = make_rope(8, "interleaved");
  alpha_one.set_extrapolation({"dynamic_ntk", 3.0, 16});
  ntk.set_extrapolation({"ntk", 3.0, 16});
  CATCH_CHECK(close(alpha_one.inverse_frequencies(), ntk.inverse_frequencies()));
}

CATCH_TEST_CASE("xpos under each extrapolation method: the rotation changes, the decay does not", "[rotary][xpos]") {
  XposImpl xpos(EncodingContext{8, 1, 1, true}, OptionValues::defaults(XposImpl::options()));
  auto q = torch::randn({1, 1, 5, 8});
  const Positions p = contiguous_positions(1, 5);
  auto qkv = torch::zeros({24, 8}), bias = torch::zeros({24});
  // a rotation keeps each pair's norm: the pair norms' ratio is xpos's decay (times YaRN's magnitude)
  auto pair_norms = [](const torch::Tensor& x) { return x.view({5, 4, 2}).norm(2, -1); };
  auto decay = [&]() {
    auto [qr, kr] = xpos.rotate(q, q, AttentionContext{p, 0, qkv, bias});
    return pair_norms(qr) / pair_norms(q) / xpos.rotation_magnitude();
  };
  const auto plain = decay();
  for (const std::string method : {"interpolation", "ntk", "yarn", "dynamic_ntk"}) {
    CATCH_INFO(method);
    auto before = xpos.angles(at_positions({4}));
    xpos.set_extrapolation({method, 3.0, 8});
    CATCH_CHECK_FALSE(close(xpos.angles(at_positions({4})), before));
    CATCH_CHECK(close(decay(), plain));
    xpos.set_extrapolation({});
  }
}



CATCH_TEST_CASE("xPos golden scale factors and decay (Sun et al. 2022)", "[rotary][xpos]") {
  XposImpl xpos(EncodingContext{4, 1, 1, true}, OptionValues::defaults(XposImpl::options()));
  // zeta_i = (2i + 0.4 Dh) / (1.4 Dh), Dh = 4: 1.6 / 5.6 and 3.6 / 5.6
  auto s = xpos.scale(at_positions({512, -512, 0, 256}))[0];
  CATCH_CHECK(s[0][0].item<float>() == Approx(0.2857142857));
  CATCH_CHECK(s[0][1].item<float>() == Approx(0.6428571429));
  CATCH_CHECK(s[1][0].item<float>() == Approx(1 / 0.2857142857));
  CATCH_CHECK(s[2][1].item<float>() == Approx(1.0));
  CATCH_CHECK(s[3][0].item<float>() == Approx(std::sqrt(0.2857142857)));
  // q'.k' = rope(q).rope(k) scaled by zeta^((i - j) / 512) per pair: shift invariant, and a
  // key 512 before the query is damped by zeta in each pair
  auto q = torch::tensor({1.0f, 0.0f, 0.0f, 0.0f}).view({1, 1, 1, 4});
  auto positions_of = [](int64_t query, int64_t key) {
    return Positions{at_positions({query}), at_positions({key})};
  };
  auto qkv = torch::zeros({12, 4}), bias = torch::zeros({12});
  auto score = [&](int64_t i, int64_t j) {
    const Positions p = positions_of(i, j);
    auto [qr, kr] = xpos.rotate(q, q, AttentionContext{p, 0, qkv, bias});
    return torch::matmul(qr, kr.transpose(-2, -1)).item<float>();
  };
  CATCH_CHECK(score(600, 88) == Approx(0.2857142857 * std::cos(512.0)).margin(1e-4));
  CATCH_CHECK(score(1600, 1088) == Approx(score(600, 88)).margin(1e-4));
  CATCH_CHECK(score(5, 5) == Approx(1.0).margin(1e-5));
}

CATCH_TEST_CASE("cape positions: shifted, jittered and scaled reals in order, contiguous at evaluation",
                "[rotary][sampler]") {
  PositionsConfig config;
  config.sampler = "cape";  // Delta_max 5, epsilon_max 0.5, lambda_max 1.03
  PositionSampler sampler(config);
  CATCH_CHECK(sampler.continuous());
  Rng a(5), b(5), c(6);
  auto p = sampler.sample(3, 40, a, torch::kCPU);
  CATCH_REQUIRE(p.query.scalar_type() == torch::kFloat64);
  CATCH_CHECK(torch::equal(p.query[0], p.query[2]));  // one draw per batch
  CATCH_CHECK(torch::equal(sampler.sample(3, 40, b, torch::kCPU).query, p.query));
  CATCH_CHECK_FALSE(torch::equal(sampler.sample(3, 40, c, torch::kCPU).query, p.query));
  // over many draws: steps (1 + e' - e) lambda stay in [(1 - 1) / 1.03, 2 x 1.03], order is
  // kept, position 0 lands in [-5.5, 5.5] x 1.03, and its mean (the shift's) is near 0
  Rng d(7);
  double first_sum = 0, step_min = 1e9, step_max = 0;
  const int draws = 2000;
  for (int n = 0; n < draws; ++n) {
    auto row = sampler.sample(1, 20, d, torch::kCPU).query[0];
    auto steps = row.narrow(0, 1, 19) - row.narrow(0, 0, 19);
    step_min = std::min(step_min, steps.min().item<double>());
    step_max = std::max(step_max, steps.max().item<double>());
    const double first = row[0].item<double>();
    CATCH_REQUIRE(std::abs(first) <= 5.5 * 1.03);
    first_sum += first;
  }
  CATCH_CHECK(step_min > 0);  // sorted: epsilon_max 0.5 keeps the order
  CATCH_CHECK(step_max <= 2 * 1.03);
  CATCH_CHECK(step_max > 1.8);  // the jitter is used
  // the shift is uniform on [-5, 5] (sd 2.89) plus jitter (sd 0.29): the mean of 2000 is within 4 sd of 0
  CATCH_CHECK(std::abs(first_sum / draws) < 4 * 2.9 / std::sqrt(double(draws)));
  // evaluation: 0..T-1, as the paper (the augmentation is for training)
  CATCH_CHECK(torch::equal(sampler.sample_for_evaluation(2, 6, d, torch::kCPU).query, contiguous_positions(2, 6).query));
  CATCH_CHECK(sampler.position_range(20) == static_cast<int64_t>(std::ceil(25.5 * 1.03)));
}

CATCH_TEST_CASE("random_float positions: sorted uniform reals below L_max, also at evaluation", "[rotary][sampler]") {
  PositionsConfig config;
  config.sampler = "random_float";
  config.max_length = 100;
  PositionSampler sampler(config);
  Rng a(5), b(5);
  auto p = sampler.sample(2, 30, a, torch::kCPU);
  CATCH_REQUIRE(p.query.scalar_type() == torch::kFloat64);
  auto row = p.query[0];
  CATCH_CHECK((row.narrow(0, 1, 29) >= row.narrow(0, 0, 29)).all().item<bool>());
  CATCH_CHECK(row.min().item<double>() >= 0);
  CATCH_CHECK(row.max().item<double>() < 100);
  CATCH_CHECK(torch::equal(sampler.sample(2, 30, b, torch::kCPU).query, p.query));
  CATCH_CHECK_FALSE(row.equal(row.floor()));  // real, not integers
  Rng e(5);
  CATCH_CHECK(torch::equal(sampler.sample_for_evaluation(2, 30, e, torch::kCPU).query, p.query));
  // the draws are uniform: mean L/2 (sd of a mean of N: L / sqrt(12 N)), a quarter below L/4
  Rng d(9);
  std::vector<double> all;
  for (int n = 0; n < 100; ++n)
    for (double v : PositionSampler::random_floats(20, 100.0, d)) all.push_back(v);
  const double N = double(all.size()), mean = std::accumulate(all.begin(), all.end(), 0.0) / N;
  CATCH_CHECK(std::abs(mean - 50.0) < 4 * 100.0 / std::sqrt(12 * N));
  const double below = std::count_if(all.begin(), all.end(), [](double v) { return v < 25; }) / N;
  CATCH_CHECK(std::abs(below - 0.25) < 4 * std::sqrt(0.25 * 0.75 / N));
}

CATCH_TEST_CASE("randomized positions: sorted, unique, in range, reproducible from the seed", "[rotary][sampler]") {
  PositionsConfig config;
  config.sampler = "randomized";
  config.max_length = 100;
  PositionSampler sampler(config);
  Rng a(5), b(5), c(6);
  auto p = sampler.sample(3, 40, a, torch::kCPU);
  CATCH_CHECK(p.query.sizes() == torch::IntArrayRef({3, 40}));
  CATCH_CHECK(torch::equal(p.query, p.key));
  CATCH_CHECK(torch::equal(p.query[0], p.query[2]));  // one draw per batch, as Ruoss et al.
  auto row = p.query[0];
  CATCH_CHECK((row.narrow(0, 1, 39) > row.narrow(0, 0, 39)).all().item<bool>());  // sorted and unique
  CATCH_CHECK(row.min().item<int64_t>() >= 0);
  CATCH_CHECK(row.max().item<int64_t>() < 100);
  // what the host knows: the draw's bounds, and the sampler's offset bound (the same every draw)
  const PositionFacts* facts = p.known_facts();
  CATCH_REQUIRE(facts != nullptr);
  CATCH_CHECK_FALSE(facts->contiguous);
  CATCH_CHECK(facts->smallest == row.min().item<int64_t>());
  CATCH_CHECK(facts->largest == row.max().item<int64_t>());
  CATCH_CHECK(facts->offset_bound == 99);
  Rng short_draw(8);
  CATCH_CHECK(sampler.sample(3, 2, short_draw, torch::kCPU).known_facts()->offset_bound == 99);
  CATCH_CHECK(contiguous_positions(2, 7).known_facts()->offset_bound == 6);
  CATCH_CHECK(shared_row_positions(torch::tensor({0, 3, 9}, torch::kInt64), 2, torch::kCPU).facts.offset_bound == -1);
  CATCH_CHECK_THROWS_WITH(shared_row_positions(torch::tensor({0, 3, 9}, torch::kInt64), 2, torch::kCPU, 9),
                          test::ContainsText("outside the stated range [0, 9)"));
  CATCH_CHECK(torch::equal(sampler.sample(3, 40, b, torch::kCPU).query, p.query));
  CATCH_CHECK_FALSE(torch::equal(sampler.sample(3, 40, c, torch::kCPU).query, p.query));
  // every position of the range is drawn sometimes
  std::set<int64_t> seen;
  Rng d(7);
  for (int i = 0; i < 200; ++i)
    for (int64_t v : PositionSampler::randomized(10, 100, d)) seen.insert(v);
  CATCH_CHECK(seen.size() == 100u);
  CATCH_CHECK_THROWS_WITH(PositionSampler::randomized(101, 100, d), test::ContainsText("raise positions.max_length"));

  config.sampler = "random_offset";
  PositionSampler offset(config);
  auto o = offset.sample(2, 30, a, torch::kCPU).query[0];
  CATCH_CHECK(torch::equal(o - o[0], torch::arange(30)));
  CATCH_CHECK(o[-1].item<int64_t>() < 100);
}

CATCH_TEST_CASE("a run checks that the sampler's positions fit the scheme before training", "[rotary][sampler]") {
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config({"encoding.name=learned", "encoding.max_positions=64", "positions.sampler=randomized",
                                   "positions.max_length=128"});
  Encoder model = build_model(config, *task);
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *task, *model),
                          test::ContainsText("positions up to 127) cannot be encoded: learned: position 127 "
                                                    "does not fit the table of max_positions = 64 rows"));
  auto short_range = test::tiny_config({"positions.sampler=randomized", "positions.max_length=10"});
  Encoder plain = build_model(short_range, *task);
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(short_range, *task, *plain),
                          test::ContainsText("(16 tokens) does not fit positions.max_length = 10"));
  // evaluation with contiguous positions: only training lengths (6: 12 tokens) must fit L_max
  auto contiguous_eval = test::tiny_config({"positions.sampler=randomized", "positions.max_length=12",
                                            "positions.evaluate_with=contiguous"});
  CATCH_CHECK_NOTHROW(check_lengths_fit(contiguous_eval, *task, *plain));
  contiguous_eval.positions.evaluate_with = "sampler";
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(contiguous_eval, *task, *plain),
                          test::ContainsText("length 8 (16 tokens) does not fit positions.max_length = 12"));
  contiguous_eval.positions.evaluate_with = "contiguous";
  contiguous_eval.positions.max_length = 11;
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(contiguous_eval, *task, *plain),
                          test::ContainsText("length 6 (12 tokens) does not fit positions.max_length = 11"));
  auto not_rotary = test::tiny_config({"encoding.name=alibi", "eval.extrapolation=[none, ntk]"});
  Encoder alibi = build_model(not_rotary, *task);
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(not_rotary, *task, *alibi),
                          test::ContainsText("extrapolation method 'ntk' (eval.extrapolation, pelab eval --extrapolation) needs a "
                                             "scheme that has one"));
}

CATCH_TEST_CASE("one trained model is evaluated plain and stretched in the same run", "[rotary][sampler]") {
  auto config = test::tiny_config({"encoding.name=rope", "eval.extrapolation=[none, interpolation, ntk]",
                                   "eval.lengths=[3, 12]", "positions.sampler=randomized", "positions.max_length=40"});
  auto task = test::default_task("reverse_string");
  Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
  auto results = trainer.evaluator().evaluate();
  CATCH_REQUIRE(results.size() == 6u);
  CATCH_CHECK(results[0].method == "none");
  CATCH_CHECK(results[5].method == "ntk");
  CATCH_CHECK(results[5].length == 12);
  // below the training length nothing is stretched: the three methods agree
  CATCH_CHECK(results[0].loss == results[2].loss);
  CATCH_CHECK(results[0].loss == results[4].loss);
  // beyond it they differ
  CATCH_CHECK(results[1].loss != results[3].loss);
  CATCH_CHECK(results[1].loss != results[5].loss);
}

CATCH_TEST_CASE("positions.evaluate_with: contiguous evaluates a randomized-position model on 0..T-1", "[sampler]") {
  auto task = test::default_task("reverse_string");
  auto evaluate = [&](const std::vector<std::string>& overrides) {
    auto config = test::tiny_config(overrides);
    return Trainer(config, build_model(config, *task), *task, torch::kCPU).evaluator().evaluate_length(8, 32).loss;
  };
  const double contiguous = evaluate({"encoding.name=rope"});
  const double randomized_then_contiguous = evaluate(
      {"encoding.name=rope", "positions.sampler=randomized", "positions.max_length=64", "positions.evaluate_with=contiguous"});
  const double randomized = evaluate({"encoding.name=rope", "positions.sampler=randomized", "positions.max_length=64"});
  CATCH_CHECK(randomized_then_contiguous == contiguous);
  CATCH_CHECK(randomized != contiguous);
}

namespace {

// FoPE's rotation by its formula, one head, pair and position at a time: pair d of head h at
// position p turns (x1, x2) into (x1 c - x2 s, x1 s + x2 c) with c = sum_k cos(theta_k p) C[h, k, d],
// s = sum_k sin(theta_k p) S[h, k, d] for d < P, and c = 1, s = 0 beyond. x: (B, H, T, Dh); positions: (B, T)
torch::Tensor fope_by_the_formula(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& theta,
                                  const torch::Tensor& C, const torch::Tensor& S) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), half = x.size(3) / 2, K = theta.size(0), P = C.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const double p = positions[b][t].item<double>();
        std::vector<torch::Tensor> first(half), second(half);
        for (int64_t d = 0; d < half; ++d) {
          torch::Tensor c = torch::ones({}), s = torch::zeros({});
          if (d < P) {
            c = torch::zeros({}), s = torch::zeros({});
            for (int64_t k = 0; k < K; ++k) {
              const double angle = theta[k].item<double>() * p;
              c = c + std::cos(angle) * C[h][k][d];
              s = s + std::sin(angle) * S[h][k][d];
            }
          }
          const auto x1 = x[b][h][t][d], x2 = x[b][h][t][d + half];
          first[d] = x1 * c - x2 * s;
          second[d] = x1 * s + x2 * c;
        }
        rows.push_back(torch::cat({torch::stack(first), torch::stack(second)}));
      }
  return torch::stack(rows).view(x.sizes());
}

}  // namespace

CATCH_TEST_CASE("fope: frequencies under 2 pi / max_length clipped, each pair a Fourier series, values and gradients",
                "[fope][rotary]") {
  torch::manual_seed(9);
  const int64_t Dh = 8, H = 2, B = 2, T = 5;
  // theta_i = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001; 2 pi / 100 = 0.063 keeps the first two
  auto options = test::scheme_variant("fope", {{"max_length", 100.0}, {"learn_coefficients", true}}).options;
  auto encoding = make_position_encoding("fope", EncodingContext{Dh * H, H, 1, false}, options);
  auto& fope = *std::dynamic_pointer_cast<FopeImpl>(encoding.ptr());
  CATCH_REQUIRE(fope.frequencies().size(0) == 2);
  CATCH_CHECK(fope.frequencies()[0].item<double>() == Approx(1.0));
  CATCH_CHECK(fope.frequencies()[1].item<double>() == Approx(0.1));
  auto parameters = encoding->named_parameters();
  const auto C = parameters["cos_coefficients"], S = parameters["sin_coefficients"];
  CATCH_REQUIRE(C.sizes() == torch::IntArrayRef({H, 2, 2}));  // P = min(K, Dh / 4) = 2 pairs of 4
  const auto q = torch::randn({B, H, T, Dh}, torch::requires_grad());
  auto positions = torch::tensor({0.0, 3.0, 7.5, 20.0, 41.0}, torch::kFloat64).repeat({B, 1});
  positions[1] += 2.25;  // real-valued positions, two rows
  const Positions at{positions, positions};
  const torch::Tensor unused;
  const auto [rotated, same] = encoding->rotate(q, q, AttentionContext{at, 0, unused, unused});
  const auto expected = fope_by_the_formula(q, positions, fope.frequencies(), C, S);
  CATCH_CHECK(torch::allclose(rotated, expected, 1e-5, 1e-5));
  const auto r = torch::randn_like(rotated);
  const auto got = torch::autograd::grad({(rotated * r).sum()}, {q, C, S}, {}, true);
  const auto want = torch::autograd::grad({(expected * r).sum()}, {q, C, S});
  for (size_t i = 0; i < got.size(); ++i) CATCH_CHECK(torch::allclose(got[i], want[i], 1e-4, 1e-5));
  // fixed coefficients (the default) are buffers: stored with the model, not trained
  auto fixed = make_position_encoding("fope", EncodingContext{Dh * H, H, 1, false}, test::scheme_variant("fope", {}).options);
  CATCH_CHECK(fixed->parameters().empty());
  CATCH_CHECK(fixed->named_buffers().contains("cos_coefficients"));
}

CATCH_TEST_CASE("fope by hand: sigma 0 is RoPE on every other kept frequency for a quarter of the head",
                "[fope][rotary]") {
  // Dh 8, nothing clipped (K = 4), P = 2 pairs on frequencies 0 and 2 (step 2): 1 and 0.01; pairs 2, 3 unrotated
  auto options = test::scheme_variant("fope", {{"max_length", 1e9}, {"sigma", 0.0}}).options;
  auto encoding = make_position_encoding("fope", EncodingContext{8, 1, 1, false}, options);
  const auto q = torch::arange(1, 9, torch::kFloat32).view({1, 1, 1, 8});  // (x0..x3 | x4..x7)
  const auto p = torch::full({1, 1}, 3.0, torch::kFloat64);
  const torch::Tensor unused;
  const auto out = encoding->rotate(q, q, AttentionContext{Positions(p, p), 0, unused, unused}).first.flatten();
  auto turn = [](double x1, double x2, double angle) {
    return std::pair<double, double>{x1 * std::cos(angle) - x2 * std::sin(angle), x1 * std::sin(angle) + x2 * std::cos(angle)};
  };
  const auto [a1, a2] = turn(1, 5, 3 * 1.0);
  const auto [b1, b2] = turn(2, 6, 3 * 0.01);
  CATCH_CHECK(out[0].item<double>() == Approx(a1).margin(1e-5));
  CATCH_CHECK(out[4].item<double>() == Approx(a2).margin(1e-5));
  CATCH_CHECK(out[1].item<double>() == Approx(b1).margin(1e-5));
  CATCH_CHECK(out[5].item<double>() == Approx(b2).margin(1e-5));
  for (int64_t unrotated : {2, 3, 6, 7}) CATCH_CHECK(out[unrotated].item<double>() == Approx(unrotated + 1.0));
}

CATCH_TEST_CASE("ReRoPE and Leaky ReRoPE: offsets beyond the window clamped or slowed, as a loop over (i, j)",
                "[rotary][rope][rerope]") {
  torch::manual_seed(9);
  const int64_t T = 9, Dh = 4;
  const auto q = torch::randn({1, 1, T, Dh}), k = torch::randn({1, 1, T, Dh});
  std::vector<int64_t> index(T);
  std::iota(index.begin(), index.end(), 0);
  const auto p = at_positions(index);
  const Positions positions(p, p);
  const torch::Tensor none;
  const AttentionContext attention{positions, 0, none, none};
  for (const bool causal : {false, true})
    for (const std::string method : {"rerope", "leaky_rerope"}) {
      CATCH_INFO(method << (causal ? " causal" : " bidirectional"));
      auto options = OptionValues::defaults(RopeImpl::options());
      options.set("rerope_window", 3.0);
      options.set("rerope_leak", 2.0);
      RopeImpl rope(EncodingContext{Dh, 1, 1, causal}, options);
      rope.set_extrapolation({method, 2.0, 4});
      const auto [qr, kr] = rope.rotate(q, k, attention);
      CATCH_CHECK(qr.is_same(q));  // the bias makes the whole rotary score
      const auto scores = torch::matmul(qr, kr.transpose(-2, -1)) * rope.attention_scale() + rope.score_bias(q, k, attention);
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const double d = double(i - j), w = 3.0;
          double e = d;  // the offset the score is taken at
          if (std::abs(d) >= w && (!causal || d > 0))
            e = (d > 0 ? 1 : -1) * (method == "rerope" ? w : w + (std::abs(d) - w) / 2.0);
          // q rotated by the offset, k at 0: (R(e) q_i) . k_j
          RopeImpl plain(EncodingContext{Dh, 1, 1, causal}, OptionValues::defaults(RopeImpl::options()));
          const auto rotated_q = plain.apply(q.narrow(2, i, 1), torch::full({1, 1}, e, torch::kFloat64));
          const double expected = (rotated_q.flatten() * k[0][0][j]).sum().item<double>() * rope.attention_scale();
          CATCH_CHECK(scores[0][0][i][j].item<double>() == Approx(expected).margin(1e-5));
        }
    }
  // leaky_rerope's default leak puts the longest test offset T - 1 at the longest trained one,
  // L - 1: (T - 1 - w) / (L - 1 - w)
  auto options = OptionValues::defaults(RopeImpl::options());
  options.set("rerope_window", 2.0);
  RopeImpl rope(EncodingContext{Dh, 1, 1, true}, options);
  rope.set_extrapolation({"leaky_rerope", 2.0, 5});  // T = 9 tokens: leak (8 - 2) / (4 - 2) = 3
  const auto bias = rope.score_bias(q, k, attention);
  RopeImpl plain(EncodingContext{Dh, 1, 1, true}, OptionValues::defaults(RopeImpl::options()));
  const double e = 2.0 + (8.0 - 2.0) / 3.0;  // offset 8, the longest, at 4 = L - 1
  const auto rotated_q = plain.apply(q.narrow(2, 8, 1), torch::full({1, 1}, e, torch::kFloat64));
  const double expected = (rotated_q.flatten() * k[0][0][0]).sum().item<double>() * rope.attention_scale();
  const double got = (q[0][0][8] * k[0][0][0]).sum().item<double>() * rope.attention_scale() + bias[0][0][8][0].item<double>();
  CATCH_CHECK(got == Approx(expected).margin(1e-5));
  // xpos (and every other rotary scheme) refuses them
  auto xpos = make_position_encoding("xpos", EncodingContext{Dh, 1, 1, true}, OptionValues::defaults(XposImpl::options()));
  CATCH_CHECK_THROWS_WITH(xpos->set_extrapolation({"rerope", 2.0, 4}), test::ContainsText("rerope is an extrapolation method of rope only"));
}

CATCH_TEST_CASE("rerope with a scheme that lacks it is refused before training, HoPE's pairs kept under NTK",
                "[rotary][rerope]") {
  for (const auto& overrides : std::vector<std::vector<std::string>>{
           {"encoding.name=xpos"}, {"encoding.name=rope", "encoding_mix.name=xpos", "encoding_mix.every=2"}}) {
    auto all = overrides;
    all.insert(all.end(), {"model.causal=true", "task.format=causal_lm", "model.num_layers=2",
                           "eval.extrapolation=[none, rerope]"});
    const RunConfig config = test::tiny_config(all);
    auto t = make_task(config.task.name, config.task.options, config.task.format);
    Encoder model = build_model(config, *t);
    CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *t, *model),
                            test::ContainsText("extrapolation method 'rerope' (eval.extrapolation, pelab eval "
                                               "--extrapolation): rotary: rerope is an extrapolation method of rope only"));
  }
  // HoPE judged on the trained frequencies: NTK lowers theta, but no pair stops rotating
  auto options = OptionValues::defaults(RopeImpl::options());
  options.set("min_turn_length", 64.0);
  RopeImpl hope(EncodingContext{8, 1, 1, false}, options);
  hope.set_extrapolation({"ntk", 4.0, 16});
  const auto theta = hope.inverse_frequencies();
  CATCH_CHECK(theta[1].item<double>() > 0);   // 0.1 x 64 >= 2 pi in training: still rotates
  CATCH_CHECK(theta[2].item<double>() == 0);  // 0.01 x 64 < 2 pi: never rotated
}
