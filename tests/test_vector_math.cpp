// The torch-free helpers the CPU kernels share (core/model/vector_math.h), compiled here
// for the baseline instruction set; the kernels' AVX2 and AVX-512 copies compile the same
// source (and test_encoder.cpp checks them through the attention and GELU they compute).
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/model/vector_math.h"

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
