// model.logit_scaling: each query's attention logits z times log n (log-length scaling,
// Chiang and Cholak 2022) or s_h log n (SSMax, Nakanishi 2025: z_j -> n^(s z_j) / sum_k n^(s z_k)),
// n the keys the query may see. Checked against the papers' formula written as a loop, with
// and without a scheme's bias, padding, causal and bidirectional: values and gradients.
#include "tests/catch.h"

#include <cmath>
#include <functional>

#include "core/config/config.h"
#include "core/encodings/registry.h"
#include "core/model/attention.h"
#include "core/model/attention_mask.h"
#include "core/model/encoder.h"
#include "data/task_registry.h"
#include "core/analysis/score_terms.h"
#include "tests/support.h"

namespace pelab {
namespace {

// The probabilities by the papers' formula, one batch row, head and query at a time: over the
// keys j the query sees (not padding; causally j <= i), n of them,
// p_j = exp(f(h, n) z_j) / sum_k exp(f(h, n) z_k), z = q.k * scale + bias: f = s_h log n is
// n^(s z_j) / sum_k n^(s z_k) (s = 1: log-length scaling), f = c a constant temperature, ...
// q, k: (B, H, T, Dh); bias: (B|1, H|1, T, T) or undefined; padding: (B, T) bool
using Factor = std::function<torch::Tensor(int64_t head, double n)>;
torch::Tensor formula_probs(const torch::Tensor& q, const torch::Tensor& k, double scale, const torch::Tensor& bias,
                            const torch::Tensor& padding, bool causal, const Factor& factor) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<int64_t> seen;
        for (int64_t j = 0; j < T; ++j)
          if (!padding[b][j].item<bool>() && (!causal || j <= i)) seen.push_back(j);
        const double n = static_cast<double>(seen.size());
        std::vector<torch::Tensor> powers(T, torch::zeros({}, q.options()));
        torch::Tensor total = torch::zeros({}, q.options());
        for (int64_t j : seen) {
          torch::Tensor z = (q[b][h][i] * k[b][h][j]).sum() * scale;
          if (bias.defined()) z = z + bias[bias.size(0) > 1 ? b : 0][bias.size(1) > 1 ? h : 0][i][j];
          powers[j] = torch::exp(factor(h, n) * z);
          total = total + powers[j];
        }
        for (auto& p : powers) p = p / total;
        rows.push_back(torch::stack(powers));
      }
  return torch::stack(rows).view({B, H, T, T});
}

}  // namespace

CATCH_TEST_CASE("logit scaling equals n^(s z) / sum n^(s z) over the keys each query sees, values and gradients",
                "[attention][logit_scaling]") {
  torch::manual_seed(3);
  const int64_t B = 2, T = 6, D = 16, H = 4;
  for (const std::string scaling : {"log_length", "ssmax", "constant", "per_head", "llama4"})
    for (const std::string scheme : {"none", "alibi"})
      for (bool causal : {false, true}) {
        CATCH_INFO(scaling << " " << scheme << (causal ? " causal" : " bidirectional"));
        // llama4 with floor_scale 2: floor(n / 2) moves within these 6 tokens
        MultiHeadAttention attention(D, H, 0.0, 0, LogitScaling{scaling, 0.43, 1.7, 2.0, 0.3});
        auto encoding = make_position_encoding(scheme, EncodingContext{D, H, 1, causal}, test::scheme_variant(scheme, {}).options);
        torch::Tensor s;  // ssmax's and per_head's learned values per head
        if (scaling == "ssmax" || scaling == "per_head") {  // per-head values away from the initial ones
          s = attention->named_parameters()[scaling == "ssmax" ? "ssmax_scale" : "logit_scale"];
          CATCH_REQUIRE(torch::allclose(s, torch::full({H}, scaling == "ssmax" ? 0.43 : 1.7)));
          torch::NoGradGuard no_grad;
          s.copy_(torch::tensor({0.43, 1.5, -0.7, 2.0}));
        }
        const Factor factor = [&](int64_t h, double n) -> torch::Tensor {
          if (scaling == "log_length") return torch::full({}, std::log(n));
          if (scaling == "ssmax") return s[h] * std::log(n);
          if (scaling == "constant") return torch::full({}, 1.7);
          if (scaling == "per_head") return s[h];
          return torch::full({}, 1 + 0.3 * std::log(std::floor(n / 2.0) + 1));  // llama4
        };
        const auto x = torch::randn({B, T, D}, torch::requires_grad());
        auto padding = torch::zeros({B, T}, torch::kBool);
        padding[1][T - 1] = true, padding[1][T - 2] = true;  // row 1: 4 real tokens
        const AttentionMask mask(padding, causal);
        AttentionRecord record;
        record.keep_scores = true;
        const auto out = attention->forward(x, mask, contiguous_positions(B, T), *encoding, &record);
        torch::Tensor bias;
        for (const auto& term : record.bias_terms) bias = bias.defined() ? bias + term.value : term.value;
        const auto expected = formula_probs(record.q, record.k, record.scale, bias, padding, causal, factor);
        CATCH_CHECK(torch::allclose(record.probs, expected, 1e-5, 1e-6));
        // the gradients through both, of x and (ssmax) s, for one random weighting of the probabilities
        const auto weights = torch::randn({B, H, T, T});
        std::vector<torch::Tensor> inputs = {x};
        if (s.defined()) inputs.push_back(s);
        const auto got = torch::autograd::grad({(record.probs * weights).sum()}, inputs, {}, true);
        const auto want = torch::autograd::grad({(expected * weights).sum()}, inputs);
        for (size_t i = 0; i < got.size(); ++i) CATCH_CHECK(torch::allclose(got[i], want[i], 1e-4, 1e-5));
        // the score terms carry the factor: softmax of their sum (masked) is the map
        auto scores = torch::zeros({B, H, T, T});
        for (const auto& term : layer_score_terms(record, nullptr)) scores = scores + term.value;
        CATCH_CHECK(torch::allclose(torch::softmax(scores + mask.additive(), -1), record.probs, 1e-5, 1e-6));
        // the path without a record (the fused kernel's place) computes the same output
        torch::NoGradGuard no_grad;
        CATCH_CHECK(torch::allclose(attention->forward(x, mask, contiguous_positions(B, T), *encoding), out, 1e-5, 1e-6));
      }
}

CATCH_TEST_CASE("logit scaling by hand: three keys, scores 1, 0, 0 give 3/5, 1/5, 1/5", "[attention][logit_scaling]") {
  // log 3 * (1, 0, 0) through softmax: (3, 1, 1) / 5. q = k = e_0 for query 0 and key 0, 0 elsewhere.
  const int64_t D = 2, H = 1, T = 3;
  MultiHeadAttention attention(D, H, 0.0, 0, LogitScaling{"log_length"});
  auto encoding = make_position_encoding("none", EncodingContext{D, H, 1, false}, OptionValues());
  {
    torch::NoGradGuard no_grad;
    auto weight = attention->named_parameters()["qkv.weight"];  // (3D, D): q rows, k rows, v rows
    weight.zero_();
    attention->named_parameters()["qkv.bias"].zero_();
    weight[0][0] = 1.0;                  // q_0 = x_0
    weight[D][0] = std::sqrt(2.0);       // k_0 = sqrt(2) x_0: q.k / sqrt(Dh) = x_0^2
  }
  auto x = torch::zeros({1, T, D});
  x[0][0][0] = 1.0;  // token 0: x_0 = 1; the others 0
  AttentionRecord record;
  attention->forward(x, AttentionMask(), contiguous_positions(1, T), *encoding, &record);
  CATCH_CHECK(torch::allclose(record.probs[0][0][0], torch::tensor({0.6f, 0.2f, 0.2f}), 0, 1e-6));
  CATCH_CHECK(torch::allclose(record.probs[0][0][1], torch::full({3}, 1.0f / 3), 0, 1e-6));  // all scores 0
}

CATCH_TEST_CASE("model.logit_scaling: validated, stored only when set, one s per head and block for ssmax",
                "[config][logit_scaling]") {
  const auto plain = test::tiny_config();
  CATCH_CHECK(to_yaml(plain).find("logit_scaling") == std::string::npos);  // earlier runs' configs unchanged
  const auto ssmax = test::tiny_config({"model.logit_scaling=ssmax", "model.ssmax_init=0.5"});
  const auto yaml = to_yaml(ssmax);
  CATCH_CHECK(yaml.find("logit_scaling: ssmax") != std::string::npos);
  CATCH_CHECK(yaml.find("ssmax_init: 0.5") != std::string::npos);
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"model.logit_scaling=cubic"}),
                          Catch::Matchers::Contains("logit_scaling") && Catch::Matchers::Contains("log_length"));
  Encoder model(ssmax.model, ssmax.encoding, 4, 3);
  int64_t scales = 0;
  for (const auto& p : model->named_parameters())
    if (p.key().find("ssmax_scale") != std::string::npos) {
      ++scales;
      CATCH_CHECK(torch::allclose(p.value(), torch::full({ssmax.model.num_heads}, 0.5)));
    }
  CATCH_CHECK(scales == ssmax.model.num_layers);
  // the temperatures' settings are stored with them, and only then
  const auto per_head = test::tiny_config({"model.logit_scaling=per_head", "model.logit_scale=0.8"});
  CATCH_CHECK(to_yaml(per_head).find("logit_scale: 0.8") != std::string::npos);
  CATCH_CHECK(to_yaml(per_head).find("llama4_scale") == std::string::npos);
  const auto llama4 = test::tiny_config({"model.logit_scaling=llama4", "model.llama4_floor_scale=16"});
  CATCH_CHECK(to_yaml(llama4).find("llama4_floor_scale: 16") != std::string::npos);
  CATCH_CHECK(parse_run_config(to_yaml(llama4), "again.yaml", {}, scheme_catalog(), task_catalog()).model.llama4_floor_scale ==
              16);
}

}  // namespace pelab
