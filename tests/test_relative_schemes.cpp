// Relative and bias schemes: golden numbers from the papers and reference implementations,
// equivalence with a deliberately naive (T, T, Dh) implementation of each paper's formula,
// and translation invariance.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>

#include "core/encodings/alibi.h"
#include "core/encodings/cope.h"
#include "core/encodings/deberta.h"
#include "core/encodings/deberta_buckets.h"
#include "core/encodings/dynamic_position_bias.h"
#include "core/encodings/fire.h"
#include "core/encodings/kerple.h"
#include "core/encodings/relative.h"
#include "core/encodings/relative_key.h"
#include "core/encodings/shaw.h"
#include "core/encodings/t5_bias.h"
#include "core/encodings/transformer_xl.h"
#include "tests/support.h"

using namespace pelab;

namespace {

std::vector<int64_t> as_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Random inputs of one attention call: B = 2, H = 2, T = 6, Dh = 4 (D = 8), two layers.
struct Fixture {
  EncodingContext context{8, 2, 2, false};
  int64_t B = 2, T = 6;
  torch::Tensor q, k, probs, qkv_weight, qkv_bias;
  Positions positions;
  explicit Fixture(bool causal = false, int64_t first_position = 0) {
    context.causal = causal;
    torch::manual_seed(42);
    q = torch::randn({B, 2, T, 4});
    k = torch::randn({B, 2, T, 4});
    probs = torch::softmax(torch::randn({B, 2, T, T}), -1);
    qkv_weight = torch::randn({24, 8});
    qkv_bias = torch::randn({24});
    positions = contiguous_positions(B, T);  // contiguous: the relative-shift path
    if (first_position != 0) {               // per-row tensors: the gather path
      positions.query = positions.query + first_position;
      positions.key = positions.key + first_position;
    }
  }
  AttentionContext at(int64_t layer) const { return {positions, layer, qkv_weight, qkv_bias}; }
  int64_t pos(int64_t i) const { return positions.query[0][i].item<int64_t>(); }
  double scale() const { return 0.5; }  // 1/sqrt(Dh)
};

PositionEncoding make(const std::string& name, const EncodingContext& context,
                      const std::vector<std::pair<std::string, OptionValue>>& overrides = {}) {
  for (const auto& e : scheme_registry()) {
    if (e.info.name != name) continue;
    auto options = OptionValues::defaults(e.info.options);
    for (const auto& [key, value] : overrides) options.set(key, value);
    auto scheme = e.factory(context, options);
    // non-trivial parameters everywhere (zero-initialised biases would hide terms)
    torch::NoGradGuard no_grad;
    for (auto& p : scheme->named_parameters())
      if (p.key().find("weight") != std::string::npos || p.key().find("bias") != std::string::npos)
        p.value().normal_(0, 0.5);
    return scheme;
  }
  throw std::invalid_argument(name);
}

torch::Tensor param(PositionEncoding& scheme, const std::string& name) { return scheme->named_parameters()[name]; }

// The naive form: R (T, T, Dh) of embeddings, then q . R.
torch::Tensor dot_rows(const torch::Tensor& x, const torch::Tensor& R) {  // x (B,H,T,Dh), R (T,T,Dh) or (H,T,T,Dh)
  if (R.dim() == 3) return torch::einsum("bhid,ijd->bhij", {x, R});
  return torch::einsum("bhid,hijd->bhij", {x, R});
}

bool close(const torch::Tensor& a, const torch::Tensor& b) { return torch::allclose(a, b, 1e-5, 1e-5); }

}  // namespace

// ---------------------------------------------------------------- the shared machinery

CATCH_TEST_CASE("RelativeGeometry: the relative shift of contiguous positions equals the gather", "[relative]") {
  torch::manual_seed(3);
  // 300 tokens: queries in blocks (38 each, the last 34); 7 tokens: one block
  for (int64_t length : {300, 7}) {
    CATCH_INFO("T = " << length);
    const int64_t B = 2, H = 3, T = length, Dh = 5;
    Positions shared = contiguous_positions(B, T);
    Positions per_row{shared.query.clone(), shared.key.clone()};  // same numbers, no broadcast
    RelativeGeometry fast(shared), general(per_row);
    CATCH_REQUIRE(fast.contiguous());
    CATCH_REQUIRE_FALSE(general.contiguous());
    CATCH_CHECK(torch::equal(fast.offsets(), general.offsets()));
    CATCH_CHECK(fast.offsets().size(0) == 2 * T - 1);
    auto x = torch::randn({B, H, T, Dh}), probs = torch::softmax(torch::randn({B, H, T, T}), -1);
    for (auto rows : {torch::randn({2 * T - 1, Dh}), torch::randn({H, 2 * T - 1, Dh})}) {
      CATCH_CHECK(close(fast.query_scores(x, rows), general.query_scores(x, rows)));
      CATCH_CHECK(close(fast.key_scores(x, rows), general.key_scores(x, rows)));
    }
    auto rows = torch::randn({2 * T - 1, Dh});
    CATCH_CHECK(close(fast.weighted_rows(probs, rows), general.weighted_rows(probs, rows)));
    auto per_offset = torch::randn({H, 2 * T - 1});
    CATCH_CHECK(close(fast.bias(per_offset), general.bias(per_offset).narrow(0, 0, 1)));
    // gradients flow through the shift as through the gather
    auto xa = x.clone().requires_grad_(true), xb = x.clone().requires_grad_(true);
    auto ga = torch::autograd::grad({(fast.query_scores(xa, rows) * probs).sum()}, {xa})[0];
    auto gb = torch::autograd::grad({(general.query_scores(xb, rows) * probs).sum()}, {xb})[0];
    CATCH_CHECK(close(ga, gb));
    auto pa = probs.clone().requires_grad_(true), pb = probs.clone().requires_grad_(true);
    auto wa = torch::autograd::grad({fast.weighted_rows(pa, rows).square().sum()}, {pa})[0];
    auto wb = torch::autograd::grad({general.weighted_rows(pb, rows).square().sum()}, {pb})[0];
    CATCH_CHECK(close(wa, wb));
  }
  const int64_t B = 2, T = 7, Dh = 5;
  Positions shared = contiguous_positions(B, T);
  RelativeGeometry fast(shared);
  auto x = torch::randn({B, 3, T, Dh});
  auto rows = torch::randn({2 * T - 1, Dh});
  // ... and against the definition: offset o = i - j sits in column o + T - 1
  auto table = fast.query_scores(x, rows);
  auto all = torch::matmul(x, rows.t());
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      CATCH_CHECK(table[1][2][i][j].item<float>() == Approx(all[1][2][i][i - j + T - 1].item<float>()).margin(1e-5));
  // shifted positions (all rows alike) are still contiguous; gaps are not
  Positions shifted{shared.query + 5, shared.key + 5};
  shifted.query = shifted.query.narrow(0, 0, 1);
  shifted.key = shifted.key.narrow(0, 0, 1);
  CATCH_CHECK(RelativeGeometry(shifted).contiguous());
  Positions gaps{shifted.query * 2, shifted.key * 2};
  CATCH_CHECK_FALSE(RelativeGeometry(gaps).contiguous());
  CATCH_CHECK(RelativeGeometry(gaps).offsets().size(0) == 2 * T - 1);  // only the offsets that occur
  CATCH_CHECK(RelativeGeometry(gaps).offsets()[1].item<int64_t>() == -2 * (T - 2));
}

CATCH_TEST_CASE("RelativeGeometry: randomized positions take products per pair equal to the definition", "[relative]") {
  torch::manual_seed(5);
  const int64_t B = 3, H = 2, T = 9, Dh = 4, L = 2048;
  // one sorted draw of [0, L) for the batch (as the randomized sampler) and one per row
  auto draw = [&](int64_t rows) { return std::get<0>(torch::randperm(L).narrow(0, 0, rows * T).view({rows, T}).sort(-1)); };
  auto one = draw(1), each = draw(B);
  std::vector<Positions> cases = {Positions{one.expand({B, T}), one.expand({B, T})}, Positions{each, each}};
  for (Positions& positions : cases) {  // what the sampler knows: positions in [0, L)
    positions.facts.query = positions.query, positions.facts.key = positions.key;
    positions.facts.offset_bound = L - 1;
  }
  for (const Positions& positions : cases)
  for (OffsetSearch search : {OffsetSearch::distinct, OffsetSearch::bounded}) {
    RelativeGeometry geometry(positions, search);
    CATCH_REQUIRE(geometry.per_pair());  // up to T (T - 1) + 1 distinct offsets > 2 T; bounded 2 L - 1
    const auto offsets = relative_offsets(positions);  // (B'|1, T, T)
    const int64_t W = geometry.offsets().size(0);
    CATCH_INFO("W = " << W << ", geometry rows " << offsets.size(0));
    if (search == OffsetSearch::bounded) CATCH_CHECK(torch::equal(geometry.offsets(), torch::arange(-(L - 1), L)));
    // on the CPU the automatic search is the distinct one (nothing to gain from sparing a read-back)
    if (search == OffsetSearch::distinct)
      CATCH_CHECK(torch::equal(geometry.offsets(), RelativeGeometry(positions).offsets()));
    // column of each pair's offset in offsets(), by search: the definition, not the inverse index
    auto column = torch::searchsorted(geometry.offsets(), offsets.reshape(-1)).view(offsets.sizes());
    auto x = torch::randn({B, H, T, Dh}, torch::requires_grad()), probs = torch::softmax(torch::randn({B, H, T, T}), -1);
    for (auto rows : {torch::randn({W, Dh}), torch::randn({H, W, Dh})}) {
      auto scores = geometry.query_scores(x, rows), key_scores = geometry.key_scores(x, rows);
      auto mixed = geometry.weighted_rows(probs, rows.dim() == 2 ? rows : rows[0]);
      for (int64_t b : {0, 2})
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < T; ++i) {
            auto row_of = [&](int64_t q, int64_t k) {
              const int64_t c = column[offsets.size(0) == 1 ? 0 : b][q][k].item<int64_t>();
              return rows.dim() == 2 ? rows[c] : rows[h][c];
            };
            auto expected_mix = torch::zeros({Dh});
            for (int64_t j = 0; j < T; ++j) {
              CATCH_CHECK(scores[b][h][i][j].item<float>() == Approx(x[b][h][i].dot(row_of(i, j)).item<float>()).margin(1e-5));
              CATCH_CHECK(key_scores[b][h][i][j].item<float>() == Approx(x[b][h][j].dot(row_of(i, j)).item<float>()).margin(1e-5));
              const int64_t c = column[offsets.size(0) == 1 ? 0 : b][i][j].item<int64_t>();
              expected_mix += probs[b][h][i][j] * (rows.dim() == 2 ? rows[c] : rows[0][c]);
            }
            CATCH_CHECK(close(mixed[b][h][i], expected_mix));
          }
      // per-offset biases land on their pairs
      if (rows.dim() == 3) {
        auto per_offset = rows.select(-1, 0);  // (H, W)
        auto bias = geometry.bias(per_offset);  // (B'|1, H, T, T)
        for (int64_t b = 0; b < bias.size(0); ++b)
          for (int64_t h = 0; h < H; ++h)
            CATCH_CHECK(torch::equal(bias[b][h], per_offset[h].index({column[b]})));
      }
      // the gradient of x: each query's products with its pairs' rows, summed with the weights
      auto weights = torch::randn({B, H, T, T});
      auto grad = torch::autograd::grad({(scores * weights).sum()}, {x})[0];
      auto expected = torch::zeros({B, H, T, Dh});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < T; ++j) {
              const int64_t c = column[offsets.size(0) == 1 ? 0 : b][i][j].item<int64_t>();
              expected[b][h][i] += weights[b][h][i][j] * (rows.dim() == 2 ? rows[c] : rows[h][c]);
            }
      CATCH_CHECK(close(grad, expected));
    }
  }
}

CATCH_TEST_CASE("RelativeGeometry: the bounded search needs positions whose maker bounds them", "[relative]") {
  auto row = torch::tensor({0, 5, 9}, torch::kInt64);
  const Positions unbounded = shared_row_positions(row, 2, torch::kCPU);
  CATCH_CHECK_THROWS_WITH(RelativeGeometry(unbounded, OffsetSearch::bounded), test::ContainsText("offset_bound"));
  const Positions bounded = shared_row_positions(row, 2, torch::kCPU, 12);
  RelativeGeometry geometry(bounded, OffsetSearch::bounded);
  CATCH_CHECK(geometry.offsets().size(0) == 23);  // -11 .. 11
  CATCH_CHECK(RelativeGeometry(bounded).offsets().size(0) == 7);  // the CPU: the 7 distinct ones
  {  // a scope makes the automatic search the bounded one on this thread
    OffsetSearchScope every_offset(OffsetSearch::bounded);
    CATCH_CHECK(RelativeGeometry(bounded).offsets().size(0) == 23);
    CATCH_CHECK_THROWS_WITH(RelativeGeometry(unbounded), test::ContainsText("offset_bound"));
    CATCH_CHECK(RelativeGeometry(bounded, OffsetSearch::distinct).offsets().size(0) == 7);
  }
  CATCH_CHECK(RelativeGeometry(bounded).offsets().size(0) == 7);
}

CATCH_TEST_CASE("RelativeGeometry: the automatic search is bounded on a GPU up to kMaxBoundedOffsets rows", "[relative]") {
  const int64_t largest = (RelativeGeometry::kMaxBoundedOffsets - 1) / 2;  // 2 bound + 1 rows
  CATCH_CHECK(automatic_offset_search(largest, /*on_gpu=*/true) == OffsetSearch::bounded);
  CATCH_CHECK(automatic_offset_search(0, true) == OffsetSearch::bounded);
  CATCH_CHECK(automatic_offset_search(largest + 1, true) == OffsetSearch::distinct);  // too many rows
  CATCH_CHECK(automatic_offset_search(-1, true) == OffsetSearch::distinct);  // no bound known
  for (int64_t bound : {int64_t{-1}, int64_t{0}, int64_t{31}, largest, largest + 1})
    CATCH_CHECK(automatic_offset_search(bound, /*on_gpu=*/false) == OffsetSearch::distinct);
}

// ---------------------------------------------------------------- golden numbers

CATCH_TEST_CASE("T5 buckets match the reference (32 buckets, max distance 128)", "[relative][t5_bias]") {
  auto offsets = torch::tensor({-1, -10, -200, 1, 10}, torch::kInt64);  // key - query
  CATCH_CHECK(as_vector(t5_relative_bucket(offsets, true, 32, 128)) == std::vector<int64_t>{1, 8, 15, 17, 24});
  CATCH_CHECK(as_vector(t5_relative_bucket(offsets, false, 32, 128)) == std::vector<int64_t>{1, 10, 31, 0, 0});
  auto more = torch::tensor({-128, -127, -64, -16, -8, -7, 0, 7, 8, 16, 64, 127, 128, 500}, torch::kInt64);
  CATCH_CHECK(as_vector(t5_relative_bucket(more, true, 32, 128)) ==
              std::vector<int64_t>{15, 15, 14, 10, 8, 7, 0, 23, 24, 26, 30, 31, 31, 31});
  CATCH_CHECK(as_vector(t5_relative_bucket(more, false, 32, 128)) ==
              std::vector<int64_t>{31, 31, 26, 16, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0});
}

CATCH_TEST_CASE("ALiBi slopes of Press et al., power-of-two and not", "[relative][alibi]") {
  auto eight = alibi_slopes(8);
  for (int i = 0; i < 8; ++i) CATCH_CHECK(eight[i].item<float>() == Approx(std::pow(2.0, -(i + 1))));
  const std::vector<double> twelve = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                                      0.7071067811865476, 0.35355339059327384, 0.17677669529663692,
                                      0.08838834764831849};
  auto t = alibi_slopes(12);
  for (int i = 0; i < 12; ++i) CATCH_CHECK(t[i].item<float>() == Approx(twelve[i]));
  const std::vector<double> six = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  auto s = alibi_slopes(6);
  for (int i = 0; i < 6; ++i) CATCH_CHECK(s[i].item<float>() == Approx(six[i]));
}

CATCH_TEST_CASE("ALiBi biases: symmetric, causal and the DeepMind variant", "[relative][alibi]") {
  Fixture f;  // 2 heads: slopes 2^-4 and 2^-8
  auto standard = make("alibi", f.context);
  auto bias = standard->score_bias(f.q, f.k, f.at(0));  // (1, H, T, T)
  CATCH_CHECK(bias.sizes() == torch::IntArrayRef({1, 2, 6, 6}));
  CATCH_CHECK(bias[0][0][2][5].item<float>() == Approx(-3.0 / 16));
  CATCH_CHECK(bias[0][0][5][2].item<float>() == Approx(-3.0 / 16));
  CATCH_CHECK(bias[0][1][0][4].item<float>() == Approx(-4.0 / 256));
  CATCH_CHECK(torch::diagonal(bias[0], 0, -2, -1).abs().max().item<float>() == 0.0f);  // zero diagonal
  auto deepmind = make("alibi", f.context, {{"variant", std::string("deepmind")}});
  auto dm = deepmind->score_bias(f.q, f.k, f.at(0));
  // DeepMind's base for T = 4, row 2: [-1.5, -0.5, 0, -1] (keys left of the query get +0.5)
  const std::vector<float> row = {-1.5f, -0.5f, 0.0f, -1.0f};
  for (int j = 0; j < 4; ++j) CATCH_CHECK(dm[0][0][2][j].item<float>() == Approx(row[j] / 16.0));
}

CATCH_TEST_CASE("ALiBi on a subset of heads and with learned slopes, as x-transformers", "[relative][alibi]") {
  Fixture f;  // 2 heads
  // heads: 1: head 0 gets the slope of a one-head model (2^-8), head 1 no bias
  auto one = make("alibi", f.context, {{"heads", int64_t(1)}});
  auto bias = one->score_bias(f.q, f.k, f.at(0));
  CATCH_CHECK(bias[0][0][2][5].item<float>() == Approx(-3.0 / 256));
  CATCH_CHECK(bias[0][1].abs().max().item<float>() == 0.0f);
  CATCH_CHECK(one->parameters().empty());
  CATCH_CHECK_THROWS_WITH(make("alibi", f.context, {{"heads", int64_t(3)}}),
                          test::ContainsText("alibi: heads = 3 exceeds the model's 2 heads"));
  // learned_slopes: log-slope parameters starting at Press's values, trained through the bias
  auto learned = make("alibi", f.context, {{"learned_slopes", true}});
  auto fixed = make("alibi", f.context);
  auto log_slopes = learned->named_parameters()["log_slopes"];
  CATCH_REQUIRE(log_slopes.sizes() == torch::IntArrayRef({2}));
  CATCH_CHECK(torch::allclose(learned->score_bias(f.q, f.k, f.at(0)), fixed->score_bias(f.q, f.k, f.at(0))));
  learned->score_bias(f.q, f.k, f.at(0)).sum().backward();
  CATCH_CHECK(log_slopes.grad().abs().min().item<float>() > 0.0f);
  {
    torch::NoGradGuard no_grad;
    log_slopes[0].fill_(std::log(0.5));
  }
  CATCH_CHECK(learned->score_bias(f.q, f.k, f.at(0))[0][0][2][5].item<float>() == Approx(-1.5));
}

CATCH_TEST_CASE("TUPE: the untied position term on a hand-computed case, TUPE-R's buckets, shifts", "[relative][tupe]") {
  const EncodingContext context{2, 1, 1, false};  // D = 2, one head (Dh = 2), one block
  auto tupe = make("tupe", context, {{"max_positions", int64_t(8)}});
  CATCH_CHECK(tupe->attention_scale() == Approx(0.5));  // 1 / sqrt(2 Dh), content and position alike
  {
    torch::NoGradGuard no_grad;
    auto table = param(tupe, "table");
    table.zero_();
    table[0] = torch::tensor({1.0f, 0.0f});
    table[1] = torch::tensor({0.0f, 1.0f});
    table[2] = torch::tensor({1.0f, 1.0f});
    param(tupe, "table_norm.weight").fill_(1);
    param(tupe, "table_norm.bias").zero_();
    // U_q = U_k = identity, no bias
    param(tupe, "projection.0.weight").copy_(torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 0.0f}, {0.0f, 1.0f}}));
    param(tupe, "projection.0.bias").zero_();
  }
  auto x = torch::zeros({1, 1, 3, 2});
  auto at = [&](const Positions& p) { return AttentionContext{p, 0, x, x}; };
  const Positions first = contiguous_positions(1, 3);
  auto bias = tupe->score_bias(x, x, at(first));  // (1, 1, 3, 3)
  // LayerNorm'd rows: p0 -> (1, -1), p1 -> (-1, 1), p2 -> (0, 0); bias = p_i . p_j / sqrt(2 Dh)
  const std::vector<std::vector<float>> expected = {{1, -1, 0}, {-1, 1, 0}, {0, 0, 0}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CATCH_CHECK(bias[0][0][i][j].item<float>() == Approx(expected[i][j]).margin(1e-4));
  // TUPE-A sees absolute positions: the same sequence at positions 3-5 scores otherwise
  Positions shifted{first.query + 3, first.key + 3};
  CATCH_CHECK_FALSE(torch::allclose(tupe->score_bias(x, x, at(shifted)), bias));
  CATCH_CHECK_FALSE(tupe->shift_invariant());
  CATCH_CHECK_THROWS_WITH(tupe->check_positions(Positions{first.query + 6, first.key + 6}),
                          test::ContainsText("tupe: position 8 does not fit the table of max_positions = 8"));

  // TUPE-R: with the absolute part silenced, the bias is T5's bucket of key - query, shift invariant
  auto relative = make("tupe", context, {{"relative", true}});
  {
    torch::NoGradGuard no_grad;
    param(relative, "table").zero_();
    param(relative, "projection.0.bias").zero_();
    param(relative, "table_norm.bias").zero_();
  }
  const auto table = param(relative, "relative_attention_bias");  // (32, 1)
  auto r = relative->score_bias(x, x, at(first));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const int64_t bucket = t5_relative_bucket(torch::tensor(j - i), true, 32, 128).item<int64_t>();
      CATCH_CHECK(r[0][0][i][j].item<float>() == Approx(table[bucket][0].item<float>()));
    }
  CATCH_CHECK(torch::allclose(relative->score_bias(x, x, at(shifted)), r));
  CATCH_CHECK(relative->position_tables().size() == 2u);

  // per_layer: a projection per block (the reference's shared one by default)
  const EncodingContext two_blocks{2, 1, 2, false};
  CATCH_CHECK(make("tupe", two_blocks)->named_parameters().contains("projection.0.weight"));
  CATCH_CHECK_FALSE(make("tupe", two_blocks)->named_parameters().contains("projection.1.weight"));
  auto per_layer = make("tupe", two_blocks, {{"per_layer", true}});
  CATCH_REQUIRE(per_layer->named_parameters().contains("projection.1.weight"));
  const AttentionContext block0{first, 0, x, x}, block1{first, 1, x, x};
  CATCH_CHECK_FALSE(torch::allclose(per_layer->score_bias(x, x, block0), per_layer->score_bias(x, x, block1)));
}

CATCH_TEST_CASE("CoPE: counted positions and interpolated embeddings on a hand-computed case", "[relative][cope]") {
  // D = 2, one head, one block. q_i = (1, 0), k_j = (0, 1): every gate is sigmoid(0) = 1/2, so
  // p_ij = (i - j + 1) / 2; the table e[r] = (r^2, 0) makes q . e[p] the interpolation of r^2.
  auto q = torch::tensor({1.0f, 0.0f}).expand({1, 1, 4, 2}).contiguous();
  auto k = torch::tensor({0.0f, 1.0f}).expand({1, 1, 4, 2}).contiguous();
  const Positions positions = contiguous_positions(1, 4);
  const AttentionContext at{positions, 0, q, q};
  auto squares = [](const torch::Tensor& table, int64_t first_row) {
    torch::NoGradGuard no_grad;
    for (int64_t r = 0; r < table.size(0); ++r) table[r][0] = double((r - first_row) * (r - first_row));
  };
  for (const bool causal : {true, false}) {
    CATCH_INFO("causal " << causal);
    auto cope = make("cope", EncodingContext{2, 1, 1, causal}, {{"npos_max", int64_t(8)}});
    CATCH_CHECK(param(cope, "table_0").size(0) == (causal ? 8 : 15));  // bidirectional: rows -7 .. 7
    CATCH_CHECK(param(cope, "table_0").abs().sum().item<float>() == 0.0f);  // zeros, as the reference
    squares(param(cope, "table_0"), causal ? 0 : 7);
    auto bias = cope->score_bias(q, k, at);  // (1, 1, 4, 4)
    // p = 0.5 -> (0 + 1) / 2, p = 1 -> 1, p = 1.5 -> (1 + 4) / 2, p = 2 -> 4
    const std::vector<float> by_distance = {0.5f, 1.0f, 2.5f, 4.0f};
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j <= i; ++j) CATCH_CHECK(bias[0][0][i][j].item<float>() == Approx(by_distance[i - j]));
    if (!causal)  // keys after the query count negatively: p_ij = -(j - i + 1) / 2, squares alike
      for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) CATCH_CHECK(bias[0][0][i][j].item<float>() == Approx(by_distance[j - i]));
  }
  // npos_max = 2: counts stop at 1, so p = 1.5 and 2 embed as 1
  auto clamped = make("cope", EncodingContext{2, 1, 1, true}, {{"npos_max", int64_t(2)}});
  squares(param(clamped, "table_0"), 0);
  auto bias = clamped->score_bias(q, k, at);
  CATCH_CHECK(bias[0][0][3][0].item<float>() == Approx(1.0f));
  CATCH_CHECK(bias[0][0][3][1].item<float>() == Approx(1.0f));
}

CATCH_TEST_CASE("DeBERTa log buckets match make_log_bucket_position", "[relative][deberta]") {
  auto r = torch::tensor({-1000, -300, -200, -129, -128, -127, -64, -1, 0, 1, 64, 127, 128, 129, 200, 300, 1000},
                         torch::kInt64);
  CATCH_CHECK(as_vector(deberta_log_bucket(r, 256, 512)) ==
              std::vector<int64_t>{-317, -207, -169, -129, -128, -127, -64, -1, 0, 1, 64, 127, 128, 129, 169, 207, 317});
  auto small = torch::tensor({-100, -40, -17, -16, -15, -1, 0, 1, 15, 16, 17, 40, 100}, torch::kInt64);
  CATCH_CHECK(as_vector(deberta_log_bucket(small, 32, 64)) ==
              std::vector<int64_t>{-37, -27, -17, -16, -15, -1, 0, 1, 15, 16, 17, 27, 37});
  // the scalar form (core/encodings/deberta_buckets.h) gives the same buckets
  for (const auto& [buckets, reach] : {std::pair<int64_t, int64_t>{256, 512}, {32, 64}, {8, 32}, {2, 4}}) {
    auto all = torch::arange(-1100, 1101, torch::kInt64);
    const auto tensor_form = as_vector(deberta_log_bucket(all, buckets, reach));
    std::vector<int64_t> scalar_form;
    for (int64_t offset = -1100; offset <= 1100; ++offset)
      scalar_form.push_back(deberta_log_bucket_of(offset, buckets, reach));
    CATCH_CHECK(scalar_form == tensor_form);
  }
  CATCH_CHECK(deberta_log_bucket_of(-300, 256, 512) == -207);
  CATCH_CHECK(deberta_log_bucket_of(1000, 256, 512) == 317);
  // every distance lands in the 2S-row table after the clamp
  DebertaImpl scheme(EncodingContext{8, 2, 1, false}, OptionValues::defaults(DebertaImpl::options()));
  auto index = scheme.table_index(contiguous_positions(1, 3000));
  CATCH_CHECK(index.min().item<int64_t>() == 0);
  CATCH_CHECK(index.max().item<int64_t>() == 2 * 256 - 1);
}

CATCH_TEST_CASE("Shaw clips key - query at k", "[relative][shaw]") {
  auto options = OptionValues::defaults(ShawImpl::options());
  options.set("clip", int64_t{2});
  ShawImpl shaw(EncodingContext{8, 2, 1, false}, options);
  auto index = shaw.table_index(contiguous_positions(1, 6))[0];  // clip(j - i, -2, 2) + 2
  CATCH_CHECK(as_vector(index[0]) == std::vector<int64_t>{2, 3, 4, 4, 4, 4});
  CATCH_CHECK(as_vector(index[5]) == std::vector<int64_t>{0, 0, 0, 0, 1, 2});
  CATCH_CHECK(as_vector(index[3]) == std::vector<int64_t>{0, 0, 1, 2, 3, 4});
}

CATCH_TEST_CASE("relative_key: HF's table raises a clear error beyond it, clipping extends it", "[relative][relative_key]") {
  EncodingContext context{8, 2, 1, false};
  auto options = OptionValues::defaults(RelativeKeyImpl::options());
  options.set("max_positions", int64_t{8});
  RelativeKeyImpl hf(context, options);
  CATCH_CHECK(hf.table(0).size(0) == 15);  // 2 * 8 - 1
  CATCH_CHECK(as_vector(hf.table_index(contiguous_positions(1, 3))[0][0]) == std::vector<int64_t>{7, 6, 5});
  CATCH_CHECK_NOTHROW(hf.check_positions(contiguous_positions(1, 8)));
  CATCH_CHECK_THROWS_WITH(hf.check_positions(contiguous_positions(1, 9)),
                          test::ContainsText("relative_key: distance 8 is beyond the table of max_positions = 8") &&
                              test::ContainsText("set encoding.clip"));
  {  // the bounded search (a GPU's) takes every offset of the sampler's range [0, 12): 11 > 7
    const Positions drawn = shared_row_positions(torch::tensor({0, 2, 5}, torch::kInt64), 1, torch::kCPU, 12);
    CATCH_CHECK_NOTHROW(hf.check_positions(drawn));  // the CPU: the distances that occur, up to 5
    OffsetSearchScope every_offset(OffsetSearch::bounded);
    CATCH_CHECK_THROWS_WITH(hf.check_positions(drawn), test::ContainsText("distance 11 (every offset of the sampler's "
                                                                          "positions.max_length) is beyond the table"));
    CATCH_CHECK_NOTHROW(hf.check_positions(contiguous_positions(1, 8)));  // contiguous: the 2T - 1 offsets
  }
  options.set("clip", int64_t{3});
  RelativeKeyImpl clipped(context, options);
  CATCH_CHECK(clipped.table(0).size(0) == 7);
  CATCH_CHECK_NOTHROW(clipped.check_positions(contiguous_positions(1, 100)));
  CATCH_CHECK(as_vector(clipped.table_index(contiguous_positions(1, 6))[0][5]) == std::vector<int64_t>{6, 6, 6, 5, 4, 3});
}

CATCH_TEST_CASE("KERPLE kernels match the reference values", "[relative][kerple]") {
  EncodingContext context{8, 1, 1, true};
  auto distance = torch::arange(5);
  auto log_options = OptionValues::defaults(KerpleImpl::options());
  KerpleImpl log_kernel(context, log_options);
  {
    torch::NoGradGuard no_grad;
    log_kernel.named_parameters()["r1"].fill_(0.5);
    log_kernel.named_parameters()["r2"].fill_(0.25);
  }
  const std::vector<float> log_expected = {0.0f, -0.111572f, -0.202733f, -0.279808f, -0.346574f};
  auto lk = log_kernel.kernel(distance)[0];
  for (int d = 0; d < 5; ++d) CATCH_CHECK(lk[d].item<float>() == Approx(log_expected[d]).margin(1e-6));

  auto power_options = log_options;
  power_options.set("variant", std::string("power"));
  KerpleImpl power_kernel(context, power_options);
  {
    torch::NoGradGuard no_grad;
    power_kernel.named_parameters()["r1"].fill_(1.0);
    power_kernel.named_parameters()["r2"].fill_(1.5);
  }
  const std::vector<float> power_expected = {0.0f, -1.0f, -2.828427f, -5.196152f, -8.0f};
  auto pk = power_kernel.kernel(distance)[0];
  for (int d = 0; d < 5; ++d) CATCH_CHECK(pk[d].item<float>() == Approx(power_expected[d]).margin(1e-5));
  // clamped as in the reference: both >= 1e-2, the exponent <= 2
  {
    torch::NoGradGuard no_grad;
    power_kernel.named_parameters()["r1"].fill_(-3.0);
    power_kernel.named_parameters()["r2"].fill_(7.0);
  }
  power_kernel.kernel(distance);
  CATCH_CHECK(power_kernel.named_parameters()["r1"].item<float>() == Approx(0.01));
  CATCH_CHECK(power_kernel.named_parameters()["r2"].item<float>() == Approx(2.0));
}

CATCH_TEST_CASE("FIRE's interpolated distances match the reference formula", "[relative][fire]") {
  EncodingContext context{8, 2, 1, true};
  FireImpl fire(context, OptionValues::defaults(FireImpl::options()));
  Positions p;
  p.query = torch::tensor({5, 100, 600, 2000}, torch::kInt64).unsqueeze(0);
  p.key = torch::tensor({0, 3, 0, 1000}, torch::kInt64).unsqueeze(0);
  auto x = fire.interpolated_distance(p, 0)[0];  // (4, 4): use the diagonal pairs
  const std::vector<float> expected = {0.10251746f, 0.59929044f, 0.99999976f, 0.87023464f};
  for (int i = 0; i < 4; ++i) CATCH_CHECK(x[i][i].item<float>() == Approx(expected[i]).margin(1e-6));
}

CATCH_TEST_CASE("FIRE's piecewise-linear evaluation equals the MLP", "[relative][fire]") {
  EncodingContext context{8, 2, 1, true};
  FireImpl fire(context, OptionValues::defaults(FireImpl::options()));
  auto x = torch::cat({torch::linspace(-3, 3, 2001), torch::rand({500}) * 10 - 5});
  CATCH_CHECK(close(fire.mlp(x, 0), fire.mlp_reference(x, 0)));
  // and so are the gradients (almost everywhere)
  auto xs = torch::rand({64}).requires_grad_(true);
  auto g1 = torch::autograd::grad({fire.mlp(xs, 0).sum()}, {xs})[0];
  auto g2 = torch::autograd::grad({fire.mlp_reference(xs, 0).sum()}, {xs})[0];
  CATCH_CHECK(close(g1, g2));
}

// ---------------------------------------------------------------- naive formulas

CATCH_TEST_CASE("relative_key and relative_key_query equal HF's einsum form", "[relative][naive]") {
  for (const std::string name : {"relative_key", "relative_key_query"}) {
    for (int64_t clip : {0, 2}) {
      CATCH_INFO(name << " clip " << clip);
      Fixture f(false, 3);
      auto scheme = make(name, f.context, {{"max_positions", int64_t{16}}, {"clip", clip}});
      for (int64_t layer : {0, 1}) {
        auto E = param(scheme, "distance_embedding_" + std::to_string(layer));
        auto R = torch::zeros({f.T, f.T, 4});
        for (int64_t i = 0; i < f.T; ++i)
          for (int64_t j = 0; j < f.T; ++j) {
            int64_t d = f.pos(i) - f.pos(j);
            R[i][j] = clip > 0 ? E[std::clamp<int64_t>(d, -clip, clip) + clip] : E[d + 16 - 1];
          }
        auto naive = dot_rows(f.q, R);
        if (name == "relative_key_query") naive = naive + torch::einsum("bhjd,ijd->bhij", {f.k, R});
        CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(layer)), naive * f.scale()));
      }
    }
  }
}

CATCH_TEST_CASE("shaw equals Shaw et al.'s equations with clipped key - query", "[relative][naive]") {
  Fixture f;
  auto scheme = make("shaw", f.context, {{"clip", int64_t{2}}});
  auto aK = param(scheme, "key_table_1"), aV = param(scheme, "value_table_1");
  auto RK = torch::zeros({f.T, f.T, 4}), RV = torch::zeros({f.T, f.T, 4});
  for (int64_t i = 0; i < f.T; ++i)
    for (int64_t j = 0; j < f.T; ++j) {
      const int64_t row = std::clamp<int64_t>(j - i, -2, 2) + 2;
      RK[i][j] = aK[row];
      RV[i][j] = aV[row];
    }
  CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(1)), dot_rows(f.q, RK) * f.scale()));
  auto naive_values = torch::einsum("bhij,ijd->bhid", {f.probs, RV});
  CATCH_CHECK(close(scheme->value_term(f.probs, f.at(1)), naive_values));
}

CATCH_TEST_CASE("transformer_xl equals terms (b), (c), (d) of Dai et al. eq. 3", "[relative][naive]") {
  for (bool causal : {false, true}) {
    Fixture f(causal);
    auto scheme = make("transformer_xl", f.context);
    auto u = param(scheme, "u"), v = param(scheme, "v"), W = param(scheme, "r_projection_0");
    // R[i - j]: [sin | cos] with inv_freq 1/10000^(2m/D), projected by W_R, split into heads
    auto R = torch::zeros({2, f.T, f.T, 4});
    for (int64_t i = 0; i < f.T; ++i)
      for (int64_t j = 0; j < f.T; ++j) {
        auto raw = torch::zeros({8});
        for (int64_t m = 0; m < 4; ++m) {
          const double angle = double(i - j) / std::pow(10000.0, 2.0 * m / 8);
          raw[m] = std::sin(angle);
          raw[4 + m] = std::cos(angle);
        }
        auto projected = torch::matmul(W, raw).view({2, 4});  // W_R R, heads
        for (int64_t h = 0; h < 2; ++h) R[h][i][j] = projected[h];
      }
    auto b_and_d = dot_rows(f.q + v.view({1, 2, 1, 4}), R);
    auto c = torch::einsum("hd,bhjd->bhj", {u, f.k}).unsqueeze(2);
    CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(0)), (b_and_d + c) * f.scale()));
  }
}

namespace {
// T5's bucket function, written out once more with scalars.
int64_t naive_t5_bucket(int64_t key_minus_query, bool bidirectional) {
  int64_t buckets = 32, result = 0, n = key_minus_query;
  if (bidirectional) {
    buckets /= 2;
    if (n > 0) result += buckets;
    n = std::abs(n);
  } else {
    n = std::max<int64_t>(-n, 0);
  }
  const int64_t exact = buckets / 2;
  if (n < exact) return result + n;
  const auto large = exact + int64_t(std::log(double(n) / exact) / std::log(128.0 / exact) * (buckets - exact));
  return result + std::min(large, buckets - 1);
}
}  // namespace

CATCH_TEST_CASE("t5_bias equals one table lookup per bucket, shared by layers", "[relative][naive]") {
  for (bool causal : {false, true}) {
    Fixture f(causal);
    f.T = 6;
    auto scheme = make("t5_bias", f.context);
    auto table = param(scheme, "relative_attention_bias");
    auto naive = torch::zeros({1, 2, f.T, f.T});
    for (int64_t i = 0; i < f.T; ++i)
      for (int64_t j = 0; j < f.T; ++j)
        for (int64_t h = 0; h < 2; ++h) naive[0][h][i][j] = table[naive_t5_bucket(j - i, !causal)][h];
    CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(0)), naive));
    CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(1)), naive));  // the same table in every layer
    CATCH_CHECK(scheme->attention_scale() == Approx(0.5));
  }
  Fixture f;
  CATCH_CHECK(make("t5_bias", f.context, {{"scale", std::string("none")}})->attention_scale() == 1.0);
}

CATCH_TEST_CASE("t5_bias clamp: distances beyond the longest trained one read its bucket", "[relative][t5_bias]") {
  for (bool causal : {false, true}) {
    Fixture f(causal);
    auto scheme = make("t5_bias", f.context);
    auto table = param(scheme, "relative_attention_bias");
    const auto plain = scheme->score_bias(f.q, f.k, f.at(0));
    // trained on sequences of 3 tokens: offsets up to 2; T = 6 reaches 5
    scheme->set_extrapolation({"clamp", 2.0, 3});
    auto naive = torch::zeros({1, 2, f.T, f.T});
    for (int64_t i = 0; i < f.T; ++i)
      for (int64_t j = 0; j < f.T; ++j)
        for (int64_t h = 0; h < 2; ++h)
          naive[0][h][i][j] = table[naive_t5_bucket(std::clamp<int64_t>(j - i, -2, 2), !causal)][h];
    const auto clamped = scheme->score_bias(f.q, f.k, f.at(0));
    CATCH_CHECK(close(clamped, naive));
    CATCH_CHECK_FALSE(close(clamped, plain));  // distances 3-5 have buckets of their own
    scheme->set_extrapolation({});
    CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(0)), plain));
    CATCH_CHECK_THROWS_WITH(scheme->set_extrapolation({"ntk", 2.0, 3}),
                            test::ContainsText("t5_bias: extrapolation method 'ntk' is not one of t5_bias's (none, clamp)"));
  }
  // a rotary scheme refuses it
  Fixture f;
  auto rope = make("rope", f.context);
  CATCH_CHECK_THROWS_WITH(rope->set_extrapolation({"clamp", 2.0, 3}),
                          test::ContainsText("rotary: clamp is an extrapolation method of t5_bias only"));
}

namespace {
int64_t naive_deberta_bucket(int64_t r, int64_t bucket_size, int64_t max_position) {
  const int64_t mid = bucket_size / 2;
  if (std::abs(r) <= mid) return r;
  const double log_pos = std::ceil(std::log(double(std::abs(r)) / mid) / std::log(double(max_position - 1) / mid) *
                                   (mid - 1)) + mid;
  return (r > 0 ? 1 : -1) * int64_t(log_pos);
}
}  // namespace

CATCH_TEST_CASE("deberta equals c2p + p2c of He et al. with HF's indexing", "[relative][naive]") {
  for (bool share : {true, false}) {
    CATCH_INFO("share_att_key " << share);
    Fixture f;
    f.T = 6;
    const int64_t S = 4;  // buckets 4 (exact |r| <= 2), reaching distance 6
    auto scheme = make("deberta", f.context, {{"position_buckets", S}, {"max_relative_positions", int64_t{6}},
                                              {"share_att_key", share}});
    const int64_t layer = 1;
    auto table = param(scheme, "rel_embeddings");
    auto R = torch::layer_norm(table, {8}, param(scheme, "rel_norm.weight"), param(scheme, "rel_norm.bias"), 1e-7);
    torch::Tensor Wq, bq, Wk, bk;
    if (share) {
      Wq = f.qkv_weight.narrow(0, 0, 8), bq = f.qkv_bias.narrow(0, 0, 8);
      Wk = f.qkv_weight.narrow(0, 8, 8), bk = f.qkv_bias.narrow(0, 8, 8);
    } else {
      Wq = param(scheme, "pos_query_proj.1.weight"), bq = param(scheme, "pos_query_proj.1.bias");
      Wk = param(scheme, "pos_key_proj.1.weight"), bk = param(scheme, "pos_key_proj.1.bias");
    }
    auto Kr = (torch::matmul(R, Wk.t()) + bk).view({2 * S, 2, 4});  // (2S, H, Dh)
    auto Qr = (torch::matmul(R, Wq.t()) + bq).view({2 * S, 2, 4});
    auto c2p_rows = torch::zeros({2, f.T, f.T, 4}), p2c_rows = torch::zeros({2, f.T, f.T, 4});
    for (int64_t i = 0; i < f.T; ++i)
      for (int64_t j = 0; j < f.T; ++j) {
        // c2p: delta(i, j) = bucket(i - j); p2c (HF): the key row j against -bucket(j - i), transposed
        const int64_t c2p_index = std::clamp<int64_t>(naive_deberta_bucket(i - j, S, 6) + S, 0, 2 * S - 1);
        const int64_t p2c_index = std::clamp<int64_t>(-naive_deberta_bucket(j - i, S, 6) + S, 0, 2 * S - 1);
        for (int64_t h = 0; h < 2; ++h) {
          c2p_rows[h][i][j] = Kr[c2p_index][h];
          p2c_rows[h][i][j] = Qr[p2c_index][h];
        }
      }
    auto naive = dot_rows(f.q, c2p_rows) + torch::einsum("bhjd,hijd->bhij", {f.k, p2c_rows});
    auto bias = scheme->score_bias(f.q, f.k, f.at(layer));
    CATCH_CHECK(close(bias, naive / std::sqrt(3.0 * 4)));
    CATCH_CHECK(scheme->attention_scale() == Approx(1.0 / std::sqrt(12.0)));
    // gradients too: the 11 offsets use 8 rows, each normalized and projected once and gathered
    std::vector<torch::Tensor> params = {table, param(scheme, "rel_norm.weight"), param(scheme, "rel_norm.bias")};
    if (!share) params.insert(params.end(), {Wq, bq, Wk, bk});
    const auto upstream = torch::randn_like(naive);
    const auto got = torch::autograd::grad({(bias * upstream).sum()}, params);
    const auto want = torch::autograd::grad({(naive / std::sqrt(3.0 * 4) * upstream).sum()}, params);
    for (size_t i = 0; i < params.size(); ++i) CATCH_CHECK(close(got[i], want[i]));
  }
}

CATCH_TEST_CASE("kerple equals -r1 log(1 + r2 |i-j|) and -r1 |i-j|^r2", "[relative][naive]") {
  for (const std::string variant : {"log", "power"}) {
    Fixture f(true);
    auto scheme = make("kerple", f.context, {{"variant", variant}});
    auto r1 = param(scheme, "r1"), r2 = param(scheme, "r2");
    auto naive = torch::zeros({1, 2, f.T, f.T});
    for (int64_t i = 0; i < f.T; ++i)
      for (int64_t j = 0; j < f.T; ++j)
        for (int64_t h = 0; h < 2; ++h) {
          // the reference clamps first: r1, r2 >= 1e-2, the power's exponent <= 2
          const double d = std::abs(double(i - j)), a = std::max(r1[h].item<double>(), 1e-2);
          const double b = std::clamp(r2[h].item<double>(), 1e-2, variant == "log" ? 1e9 : 2.0);
          naive[0][h][i][j] = variant == "log" ? -a * std::log(1 + b * d) : -a * std::pow(d, b);
        }
    CATCH_CHECK(close(scheme->score_bias(f.q, f.k, f.at(0)), naive));
  }
}

CATCH_TEST_CASE("cope equals the sums of sigmoid gates and the interpolated rows of Golovneva et al.",
                "[relative][naive]") {
  for (const bool causal : {true, false}) {
    CATCH_INFO("causal " << causal);
    Fixture f(causal);
    const int64_t npos = 3;  // small: the clamp is reached
    auto scheme = make("cope", f.context, {{"npos_max", npos}, {"init", std::string("normal")}});
    auto table = param(scheme, "table_1").detach();
    const int64_t zero_row = causal ? 0 : npos - 1;
    auto q = f.q.clone().requires_grad_(), k = f.k.clone().requires_grad_();
    auto bias = scheme->score_bias(q, k, f.at(1));
    auto naive = torch::zeros({f.B, 2, f.T, f.T});
    for (int64_t b = 0; b < f.B; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < f.T; ++i)
          for (int64_t j = 0; j < f.T; ++j) {
            if (causal && j > i) continue;  // masked keys: any value
            double count = 0;
            for (int64_t t = std::min(i, j); t <= std::max(i, j); ++t)
              count += 1 / (1 + std::exp(-f.scale() * (f.q[b][h][i] * f.k[b][h][t]).sum().item<double>()));
            const double p = std::min(count, double(npos - 1)) * (j > i ? -1 : 1);
            const double lower = std::floor(p), w = p - lower;
            auto row = [&](double r) { return (f.q[b][h][i] * table[int64_t(r) + zero_row]).sum().item<double>(); };
            naive[b][h][i][j] = w * row(std::ceil(p)) + (1 - w) * row(lower);
          }
    if (causal) bias = bias * torch::ones({f.T, f.T}).tril();
    CATCH_CHECK(close(bias, naive));
    // gradients reach q and k through the interpolation weights, and the table
    bias.sum().backward();
    CATCH_CHECK(k.grad().abs().sum().item<float>() > 0);
    CATCH_CHECK(q.grad().abs().sum().item<float>() > 0);
  }
}

CATCH_TEST_CASE("cope's fused CPU kernels equal its unfused bias, values and the gradients of q, k and the table",
                "[relative][cope]") {
  for (const bool causal : {true, false})
    for (const int64_t npos : {int64_t{3}, int64_t{64}}) {  // 3: counts reach the clamp
      CATCH_CAPTURE(causal, npos);
      const int64_t B = 2, H = 3, T = 23, Dh = 4;
      EncodingContext context{H * Dh, H, 1, causal};
      auto scheme = make_position_encoding("cope", context,
                                           test::scheme_variant("cope", {{"npos_max", npos}, {"init", std::string("normal")}}).options);
      auto& cope = *std::dynamic_pointer_cast<CopeImpl>(scheme.ptr());
      torch::manual_seed(npos + causal);
      const auto q = (torch::randn({B, H, T, Dh}) * 2).requires_grad_(), k = torch::randn({B, H, T, Dh}).requires_grad_();
      auto table = param(scheme, "table_0");
      const auto positions = contiguous_positions(B, T);
      const auto w = torch::zeros({3 * H * Dh, H * Dh}), bias_rows = torch::zeros({3 * H * Dh});
      const auto fused = scheme->score_bias(q, k, AttentionContext{positions, 0, w, bias_rows});
      const auto reference = cope.unfused_bias(q, k, table);
      CATCH_CHECK(torch::allclose(fused, reference, 1e-5, 1e-5));
      const auto r = torch::randn({B, H, T, T});
      const auto g1 = torch::autograd::grad({(fused * r).sum()}, {q, k, table});
      const auto g2 = torch::autograd::grad({(reference * r).sum()}, {q, k, table});
      // to float precision of the largest: the table's gradient sums B H T^2 terms (to about 80 here)
      for (size_t i = 0; i < g1.size(); ++i) {
        CATCH_CAPTURE(i);
        CATCH_CHECK((g1[i] - g2[i]).abs().max().item<double>() <= 1e-5 * g2[i].abs().max().item<double>());
      }
    }
}

CATCH_TEST_CASE("fire equals the MLP of psi(|i-j|) / psi(max(L, i))", "[relative][naive]") {
  Fixture f(true);
  auto scheme = make("fire", f.context);
  auto* fire = scheme->as<FireImpl>();
  const double c = param(scheme, "c_1").item<double>();
  const double L = 512.0 * std::abs(param(scheme, "length_multiplier_1").item<double>());
  // from 0: every query below L (bias per offset); from 500: queries cross L (bias per pair)
  for (int64_t first : {0, 500}) {
    CATCH_INFO("positions from " << first);
    auto x = torch::zeros({1, 20, 20});
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = 0; j < 20; ++j) {
        const double qi = first + i, distance = std::abs(double(i - j));
        x[0][i][j] = std::log(std::abs(c * distance) + 1) / (std::log(std::abs(c * std::max(qi, L)) + 1) + 1e-6);
      }
    auto naive = fire->mlp_reference(x, 1).permute({0, 3, 1, 2});
    auto q = torch::randn({1, 2, 20, 4});
    Positions contiguous = contiguous_positions(1, 20);
    contiguous.query = contiguous.query + first;
    contiguous.key = contiguous.key + first;
    Positions per_row{contiguous.query.expand({2, 20}).clone(), contiguous.key.expand({2, 20}).clone()};
    CATCH_CHECK(close(scheme->score_bias(q, q, AttentionContext{contiguous, 1, f.qkv_weight, f.qkv_bias}), naive));
    CATCH_CHECK(close(scheme->score_bias(q, q, AttentionContext{per_row, 1, f.qkv_weight, f.qkv_bias}), naive));
  }
}

// ---------------------------------------------------------------- invariances

// Shifting every position changes a shift-invariant scheme's attention in nothing, an
// absolute one's outputs: "shift invariance" of core/run/scheme_checks.h, run over every
// variant by tests/test_registry_schemes.cpp.

CATCH_TEST_CASE("every scheme runs far beyond its training lengths or refuses the positions, naming itself",
                "[relative][registry]") {
  auto task = test::default_task("reverse_string");
  for (const auto& variant : test::all_scheme_variants()) {
    CATCH_INFO(variant.label);
    // causal only where the scheme is defined for nothing else
    Encoder model = test::model_for(test::tiny_config_in_mode(test::causal_only(variant.scheme)), variant, *task);
    Rng rng(1);
    Batch b = task->sample(1, 300, rng);  // 600 tokens: beyond DeBERTa's 512 and T5's 128
    const auto positions = contiguous_positions(1, 600);
    try {
      model->encoding().check_positions(positions);
    } catch (const c10::Error& e) {  // a table sized in positions (learned, relative_key without clip)
      CATCH_CHECK_THAT(e.what(), test::ContainsText(variant.scheme + ": "));
      continue;
    }
    torch::NoGradGuard no_grad;
    auto out = model->forward(b.tokens, b.padding, positions, b.segments);
    CATCH_CHECK(torch::isfinite(out.logits).all().item<bool>());
  }
}

CATCH_TEST_CASE("shaw without the value term owns no value tables", "[relative][shaw]") {
  Fixture f;
  auto scheme = make("shaw", f.context, {{"values", false}});
  for (const auto& p : scheme->named_parameters()) CATCH_CHECK(p.key().find("value_table") == std::string::npos);
  CATCH_CHECK(scheme->named_parameters().size() == 2u);  // one key table per layer
  CATCH_CHECK_FALSE(scheme->value_term(f.probs, f.at(0)).defined());
  CATCH_CHECK(make("shaw", f.context)->value_term(f.probs, f.at(0)).defined());
}

CATCH_TEST_CASE("dynamic_position_bias: b_h(i, j) = MLP(sign(d) log(|d| + 1))_h of d = i - j, values and gradients",
                "[schemes][dynamic_position_bias]") {
  torch::manual_seed(21);
  const int64_t H = 3, T = 5;
  for (const bool log_distance : {false, true}) {
    CATCH_INFO("log_distance " << log_distance);
    auto options = OptionValues::defaults(DynamicPositionBiasImpl::options());
    options.set("width", int64_t(4));
    options.set("depth", int64_t(2));
    options.set("log_distance", log_distance);
    DynamicPositionBiasImpl scheme(EncodingContext{4 * H, H, 2, false}, options);
    const auto params = scheme.named_parameters();
    CATCH_CHECK(params.size() == 6);  // mlp.0, mlp.2, mlp.4: weight and bias each, one set for every block
    const auto w0 = params["mlp.0.weight"], b0 = params["mlp.0.bias"], w1 = params["mlp.2.weight"],
               b1 = params["mlp.2.bias"], w2 = params["mlp.4.weight"], b2 = params["mlp.4.bias"];
    // shifted positions: the bias sees offsets only
    const auto p = torch::tensor({3, 4, 5, 6, 7}, torch::kInt64).unsqueeze(0);
    const auto q = torch::zeros({1, H, T, 4});
    const Positions positions(p, p);
    const torch::Tensor none;
    const AttentionContext attention{positions, 1, none, none};
    const auto bias = scheme.score_bias(q, q, attention);  // (1, H, T, T)
    CATCH_REQUIRE(bias.sizes() == torch::IntArrayRef({1, H, T, T}));
    // the formula as a loop over (i, j)
    std::vector<torch::Tensor> rows;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const double d = i - j;
        const double x = log_distance ? (d > 0 ? 1 : d < 0 ? -1 : 0) * std::log(std::abs(d) + 1) : d;
        auto h = torch::silu(w0.squeeze(1) * x + b0);
        h = torch::silu(torch::matmul(w1, h) + b1);
        rows.push_back(torch::matmul(w2, h) + b2);  // (H)
      }
    const auto expected = torch::stack(rows).view({T, T, H}).permute({2, 0, 1}).unsqueeze(0);
    CATCH_CHECK(torch::allclose(bias, expected, 1e-5, 1e-6));
    const auto weights = torch::randn({1, H, T, T});
    const std::vector<torch::Tensor> inputs = {w0, b0, w1, b1, w2, b2};
    const auto got = torch::autograd::grad({(bias * weights).sum()}, inputs);
    const auto want = torch::autograd::grad({(expected * weights).sum()}, inputs);
    for (size_t k = 0; k < got.size(); ++k) CATCH_CHECK(torch::allclose(got[k], want[k], 1e-4, 1e-6));
  }
}
