// The torch-free helpers the CPU kernels share (core/kernels/vector_math.h), compiled here
// for the baseline instruction set; the kernels' AVX2 and AVX-512 copies compile the same
// source (and test_encoder.cpp checks them through the attention and GELU they compute).
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/vector_math.h"

using namespace pelab;

CATCH_TEST_CASE("exp_nonpositive, scalar and 16 lanes: relative error below 3e-7 on [-87, 0], 0 below, NaN kept",
                "[encoder]") {
  // the softmax's exp (16 lanes) and GELU's (scalar); compiled here for the baseline
  // instruction set, the kernels' copies by the same source
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(static_cast<float>(-87.0 * i / 200000));
  for (float special : {0.0f, -0.0f, -1e-30f, -1e-7f, -0.34657359f, -0.5f, -1.0f, -20.5f, -86.99f, -87.0f})
    x.push_back(special);
  while (x.size() % 16) x.push_back(-1.0f);
  double worst_scalar = 0, worst_lanes = 0;
  for (size_t i = 0; i < x.size(); i += 16) {
    kernels::Float16 lanes;
    std::memcpy(&lanes, &x[i], sizeof lanes);
    const kernels::Float16 e = kernels::exp_nonpositive(lanes);
    for (size_t l = 0; l < 16; ++l) {
      const double exact = std::exp(static_cast<double>(x[i + l]));
      worst_scalar = std::max(worst_scalar, std::abs(kernels::exp_nonpositive(x[i + l]) - exact) / exact);
      worst_lanes = std::max(worst_lanes, std::abs(e[l] - exact) / exact);
    }
  }
  CATCH_CHECK(worst_scalar < 3e-7);
  CATCH_CHECK(worst_lanes < 3e-7);
  // below -87 (exp < 1.7e-38, about the smallest normal float) and -inf: exactly 0; NaN stays
  const std::vector<float> edges = {-87.01f, -88.0f, -104.0f, -1e30f, -INFINITY, NAN, -87.01f, -88.0f,
                                    -104.0f, -1e30f, -INFINITY, NAN, -100.0f, -200.0f, -1000.0f, -1e10f};
  kernels::Float16 lanes;
  std::memcpy(&lanes, edges.data(), sizeof lanes);
  const kernels::Float16 e = kernels::exp_nonpositive(lanes);
  for (size_t l = 0; l < 16; ++l) {
    CATCH_CAPTURE(edges[l]);
    if (std::isnan(edges[l])) {
      CATCH_CHECK(std::isnan(e[l]));
      CATCH_CHECK(std::isnan(kernels::exp_nonpositive(edges[l])));
    } else {
      CATCH_CHECK(e[l] == 0.0f);
      CATCH_CHECK(kernels::exp_nonpositive(edges[l]) == 0.0f);
    }
  }
}

CATCH_TEST_CASE("vectors of 8 and 4 lanes (the AVX2 and SSE copies' width): exp, sum and maximum as 16 lanes",
                "[encoder]") {
  // each instruction set's kernels work on its own register width (vector_math.h); the
  // narrower vectors' exp is the same per-lane arithmetic, so equal bit for bit
  std::vector<float> x;
  for (int i = 0; i < 64; ++i) x.push_back(-0.37f * static_cast<float>(i * i % 97));
  x[5] = -INFINITY;
  x[11] = NAN;
  x[20] = -90.0f;
  for (size_t i = 0; i < x.size(); i += 16) {
    kernels::Float16 sixteen;
    std::memcpy(&sixteen, &x[i], sizeof sixteen);
    const kernels::Float16 wide = kernels::exp_nonpositive(sixteen);
    for (size_t part = 0; part < 16; part += 8) {
      kernels::Float8 eight;
      std::memcpy(&eight, &x[i + part], sizeof eight);
      const kernels::Float8 e8 = kernels::exp_nonpositive(eight);
      kernels::Float4 four;
      std::memcpy(&four, &x[i + part], sizeof four);
      const kernels::Float4 e4 = kernels::exp_nonpositive(four);
      for (size_t l = 0; l < 8; ++l) {
        CATCH_CAPTURE(i + part + l);
        const float expected = wide[part + l];
        if (std::isnan(expected)) {
          CATCH_CHECK(std::isnan(e8[l]));
        } else {
          CATCH_CHECK(e8[l] == expected);
          if (l < 4) CATCH_CHECK(e4[l] == expected);
        }
      }
    }
  }
  const kernels::Float8 eight = {3.0f, -1.0f, 0.5f, 8.0f, -7.0f, 2.0f, 0.25f, 1.0f};
  CATCH_CHECK(kernels::horizontal_sum(eight) == 6.75f);
  CATCH_CHECK(kernels::horizontal_max(eight) == 8.0f);
  const kernels::Float4 four = {-3.0f, -1.0f, -0.5f, -8.0f};
  CATCH_CHECK(kernels::horizontal_sum(four) == -12.5f);
  CATCH_CHECK(kernels::horizontal_max(four) == -0.5f);
  CATCH_CHECK(kernels::kLanesOf<kernels::Float8> == 8);
}
