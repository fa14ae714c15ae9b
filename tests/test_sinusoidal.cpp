#include "tests/catch.h"

#include <cmath>

#include "core/encodings/sinusoidal.h"
#include "tests/support.h"

using namespace pelab;

namespace {

SinusoidalPositionEncodingImpl make(int64_t d_model, const std::string& layout, double base = 10000.0) {
  auto options = OptionValues::defaults(SinusoidalPositionEncodingImpl::options());
  options.set("layout", layout);
  options.set("base", base);
  EncodingContext context;
  context.d_model = d_model;
  context.num_heads = 1;
  return SinusoidalPositionEncodingImpl(context, options);
}

torch::Tensor vectors_at(SinusoidalPositionEncodingImpl& pe, std::vector<int64_t> positions) {
  auto p = torch::tensor(positions, torch::kInt64).unsqueeze(0);
  return pe.position_vectors(p, kInputLayer)[0];  // (T, D)
}

}  // namespace

CATCH_TEST_CASE("sinusoidal inject: every_layer_scaled adds the same sinusoids times a learned scale per block",
                "[sinusoidal]") {
  auto options = OptionValues::defaults(SinusoidalPositionEncodingImpl::options());
  options.set("inject", std::string("every_layer_scaled"));
  EncodingContext context;
  context.d_model = 8;
  context.num_heads = 1;
  context.num_layers = 3;
  SinusoidalPositionEncodingImpl pe(context, options);
  auto scale = pe.named_parameters()["layer_scale"];
  CATCH_REQUIRE(scale.sizes() == torch::IntArrayRef({3}));
  CATCH_CHECK(torch::equal(scale, torch::ones({3})));  // starts as every_layer
  auto plain = make(8, "interleaved");
  auto positions = torch::tensor({0, 4, 7}, torch::kInt64).unsqueeze(0);
  const Positions p{positions, positions};
  auto x = torch::zeros({1, 3, 8});
  CATCH_CHECK(torch::equal(pe.embed(x, p, kInputLayer), x));
  {
    torch::NoGradGuard no_grad;
    scale[1].fill_(2.0);
  }
  CATCH_CHECK(torch::allclose(pe.embed(x, p, 1), 2 * plain.position_vectors(positions, kInputLayer)));
  CATCH_CHECK(torch::allclose(pe.embed(x, p, 0), plain.position_vectors(positions, kInputLayer)));
  pe.embed(x, p, 2).sum().backward();
  CATCH_CHECK(scale.grad()[2].item<float>() != 0.0f);  // trained through the block it scales
  CATCH_CHECK(scale.grad()[0].item<float>() == 0.0f);
}

CATCH_TEST_CASE("sinusoidal golden values, interleaved (Vaswani et al. 2017)", "[sinusoidal]") {
  auto pe = make(4, "interleaved");
  auto v = vectors_at(pe, {0, 1, 2});
  // d = 4: frequencies 1 and 1/100. Position 1: [sin 1, cos 1, sin 0.01, cos 0.01].
  const std::vector<float> p0 = {0.0f, 1.0f, 0.0f, 1.0f};
  const std::vector<float> p1 = {0.84147098f, 0.54030231f, 0.00999983f, 0.99995000f};
  const std::vector<float> p2 = {0.90929743f, -0.41614684f, 0.01999867f, 0.99980001f};
  for (int i = 0; i < 4; ++i) {
    CATCH_CHECK(v[0][i].item<float>() == Approx(p0[i]).margin(1e-7));
    CATCH_CHECK(v[1][i].item<float>() == Approx(p1[i]).margin(1e-7));
    CATCH_CHECK(v[2][i].item<float>() == Approx(p2[i]).margin(1e-7));
  }
}

CATCH_TEST_CASE("sinusoidal golden values match the formula at d_model 512 (the Transformer base)", "[sinusoidal]") {
  auto pe = make(512, "interleaved");
  auto v = vectors_at(pe, {37, 1000});
  for (int64_t row = 0; row < 2; ++row) {
    const double pos = row == 0 ? 37 : 1000;
    for (int64_t i : {0, 1, 10, 100, 255}) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / 512.0);
      CATCH_CHECK(v[row][2 * i].item<float>() == Approx(std::sin(angle)).margin(1e-6));
      CATCH_CHECK(v[row][2 * i + 1].item<float>() == Approx(std::cos(angle)).margin(1e-6));
    }
  }
}

CATCH_TEST_CASE("sinusoidal concatenated layouts: DeepMind [sin | cos] and tensor2tensor spacing", "[sinusoidal]") {
  auto deepmind_layout = make(4, "concatenated");
  auto deepmind = vectors_at(deepmind_layout, {1})[0];
  const std::vector<float> expected = {0.84147098f, 0.00999983f, 0.54030231f, 0.99995000f};  // sin 1, sin .01, cos 1, cos .01
  for (int i = 0; i < 4; ++i) CATCH_CHECK(deepmind[i].item<float>() == Approx(expected[i]).margin(1e-7));

  // tensor2tensor get_timing_signal_1d: inverse timescales base^(-i/(D/2-1)); d = 6 -> 1, 0.01, 1e-4
  auto t2t_layout = make(6, "concatenated_t2t");
  auto t2t = vectors_at(t2t_layout, {3})[0];
  const double inv[3] = {1.0, 0.01, 1e-4};
  for (int i = 0; i < 3; ++i) {
    CATCH_CHECK(t2t[i].item<float>() == Approx(std::sin(3 * inv[i])).margin(1e-7));
    CATCH_CHECK(t2t[3 + i].item<float>() == Approx(std::cos(3 * inv[i])).margin(1e-7));
  }
}

CATCH_TEST_CASE("sinusoidal has no parameters or buffers, so nothing lands in a checkpoint", "[sinusoidal]") {
  auto pe = make(8, "interleaved");
  CATCH_CHECK(pe.parameters().empty());
  CATCH_CHECK(pe.buffers().empty());
}

CATCH_TEST_CASE("sinusoidal keeps precision at large positions", "[sinusoidal]") {
  auto pe = make(8, "interleaved");
  auto v = vectors_at(pe, {100000});
  CATCH_CHECK(v[0][0].item<float>() == Approx(std::sin(100000.0)).margin(1e-6));
}

CATCH_TEST_CASE("sinusoidal rejects an odd d_model", "[sinusoidal]") {
  CATCH_CHECK_THROWS_WITH(make(5, "interleaved"), test::ContainsText("d_model must be even, got 5"));
}

CATCH_TEST_CASE("additive schemes inject at the input only or before every block", "[sinusoidal][learned]") {
  for (const std::string scheme : {"sinusoidal", "learned"}) {
    CATCH_INFO(scheme);
    EncodingContext context{8, 2, 3, false};
    for (const auto& entry : scheme_registry()) {
      if (entry.info.name != scheme) continue;
      auto input_only = OptionValues::defaults(entry.info.options);
      auto every_layer = input_only;
      every_layer.set("inject", std::string("every_layer"));
      auto a = entry.factory(context, input_only);
      auto b = entry.factory(context, every_layer);
      auto x = torch::zeros({1, 3, 8});
      auto positions = contiguous_positions(1, 3);
      // input only: added at the token embeddings, nowhere else
      CATCH_CHECK(a->embed(x, positions, kInputLayer).abs().sum().item<float>() > 0);
      CATCH_CHECK(a->embed(x, positions, 0).abs().sum().item<float>() == 0);
      CATCH_CHECK(a->embed(x, positions, 2).abs().sum().item<float>() == 0);
      // every layer: before each block, not at the token embeddings
      CATCH_CHECK(b->embed(x, positions, kInputLayer).abs().sum().item<float>() == 0);
      CATCH_CHECK(b->embed(x, positions, 0).abs().sum().item<float>() > 0);
      CATCH_CHECK(b->embed(x, positions, 2).abs().sum().item<float>() > 0);
    }
  }
}
