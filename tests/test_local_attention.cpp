// Local attention (model.window, model.chunk, model.global_every) and schemes by head
// (encoding_heads, hard_alibi): the masks by hand, the fused, unfused and SDPA paths alike,
// the hybrid configs, and every scheme in a head group against the scheme alone.
#include "tests/catch.h"

#include <limits>

#include "core/encodings/hard_alibi.h"
#include "core/encodings/head_groups.h"
#include "core/model/attention.h"
#include "core/model/fused_attention.h"
#include "core/run/run.h"
#include "core/train/trainer.h"
#include "tests/support.h"

using namespace pelab;
using namespace pelab::test;

namespace {

// Whether query i sees key j in the additive mask (B|1, 1, T, T), batch element b.
bool sees(const torch::Tensor& additive, int64_t b, int64_t i, int64_t j) {
  return std::isfinite(additive[additive.size(0) == 1 ? 0 : b][0][i][j].item<float>());
}

EncoderOutput forward(Encoder& model, const Batch& batch, const ForwardRequest& request = {}) {
  const auto positions = contiguous_positions(batch.tokens.size(0), batch.tokens.size(1));
  return model->forward(batch.tokens, batch.padding, positions, batch.segments, request);
}

// The encoding_heads override for groups of (heads, scheme).
std::string head_groups(const std::vector<std::pair<int64_t, std::string>>& groups) {
  std::string text = "encoding_heads=[";
  for (size_t g = 0; g < groups.size(); ++g)
    text += (g ? ", " : "") + std::string("{num_heads: ") + std::to_string(groups[g].first) + ", name: " +
            groups[g].second + "}";
  return text + "]";
}

// A grouped model's parameter name as the scheme alone names it (the group registers its
// scheme under group_0.).
std::string own_name(const std::string& name) {
  const std::string prefix = "position_encoding.group_0.";
  return name.rfind(prefix, 0) == 0 ? "position_encoding." + name.substr(prefix.size()) : name;
}

// config's model with its encoding_heads (encoding none), seeded as model_for seeds, in eval mode.
Encoder grouped_model(const RunConfig& config, const Task& task) {
  torch::manual_seed(config.seed);
  Encoder model(config.model, EncodingConfig{}, task.vocab_size(), task.num_classes(), EncodingMixConfig{},
                config.encoding_heads);
  model->eval();
  return model;
}

}  // namespace

CATCH_TEST_CASE("local attention masks: a sliding window and chunks, causal and bidirectional, by hand", "[local]") {
  const int64_t T = 7;
  for (bool causal : {false, true})
    for (const LocalAttention local : {LocalAttention{3, 0}, LocalAttention{0, 3}}) {
      CATCH_CAPTURE(causal, local.window, local.chunk);
      const auto additive = AttentionMask(T, causal, torch::kCPU).restricted(local).additive();
      CATCH_REQUIRE(additive.sizes() == torch::IntArrayRef({1, 1, T, T}));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          bool expected = !causal || j <= i;
          if (local.window > 0) expected = expected && std::abs(i - j) < local.window;  // HF: i - j < window
          if (local.chunk > 0) expected = expected && i / local.chunk == j / local.chunk;
          CATCH_CHECK(sees(additive, 0, i, j) == expected);
        }
    }
  // padding: masked for every query but its own (a query whose window holds only padding
  // keys still sees itself, and no row is masked whole)
  const auto padding = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kBool).view({1, 6});
  const auto windowed = AttentionMask(padding, true).restricted({2, 0});
  CATCH_CHECK(windowed.any());
  CATCH_CHECK_FALSE(windowed.only_causal());
  CATCH_CHECK(windowed.kernel_mask().is_same(windowed.additive()));  // the kernel reads the whole mask
  const auto& table = windowed.additive();
  CATCH_CHECK((sees(table, 0, 2, 1) && sees(table, 0, 2, 2) && !sees(table, 0, 2, 0)));
  CATCH_CHECK((!sees(table, 0, 4, 3) && sees(table, 0, 4, 4)));  // padding query 4: its window is padding
  for (int64_t i = 0; i < 6; ++i) CATCH_CHECK(torch::isfinite(table[0][0][i]).any().item<bool>());
  // unrestricted: the causal mask as before, the kernel reading padding only
  const AttentionMask plain(padding, true);
  CATCH_CHECK(plain.restricted({}).kernel_mask().is_same(plain.padding()));
  CATCH_CHECK(AttentionMask(6, true, torch::kCPU).only_causal());
}

CATCH_TEST_CASE("a local model: a window as long as the input changes nothing, a window of 1 sees one token",
                "[local]") {
  auto task = default_task("reverse_string", "causal_lm");
  Rng rng(4);
  const Batch batch = task->sample(3, 6, rng);
  auto logits = [&](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"model.causal=true", "task.format=causal_lm", "encoding.name=rope"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    Encoder model = build_model(tiny_config(all), *task);
    model->eval();
    return forward(model, batch).logits;
  };
  const auto global = logits({});
  const int64_t T = batch.tokens.size(1);
  CATCH_CHECK(torch::allclose(logits({"model.window=" + std::to_string(T)}), global, 1e-5, 1e-6));
  CATCH_CHECK(torch::allclose(logits({"model.chunk=" + std::to_string(T)}), global, 1e-5, 1e-6));
  CATCH_CHECK_FALSE(torch::allclose(logits({"model.window=2"}), global, 1e-3, 1e-4));

  // window 1, no position encoding: a token's output depends on that token alone
  auto config = tiny_config({"model.causal=true", "task.format=causal_lm", "model.window=1"});
  Encoder model = build_model(config, *task);
  model->eval();
  Batch changed = batch;
  changed.tokens = batch.tokens.clone();
  const int64_t V = task->vocab_size();  // another token at position 2 in every row
  changed.tokens.select(1, 2).copy_(batch.tokens.select(1, 2).remainder(V - 1) + 1);
  CATCH_REQUIRE((changed.tokens.select(1, 2) != batch.tokens.select(1, 2)).all().item<bool>());
  const auto before = forward(model, batch).logits, after = forward(model, changed).logits;
  for (int64_t t = 0; t < T; ++t)
    CATCH_CHECK(torch::allclose(before.select(1, t), after.select(1, t)) == (t != 2));
}

CATCH_TEST_CASE("local attention: fused, unfused and maps agree, and global_every's blocks see every key", "[local]") {
  auto task = default_task("reverse_string", "causal_lm");
  Rng rng(9);
  const Batch batch = task->sample(2, 9, rng);
  for (const std::string local : {"model.window=3", "model.chunk=4"}) {
    CATCH_CAPTURE(local);
    auto config = tiny_config({"model.causal=true", "task.format=causal_lm", "model.num_layers=4", "encoding.name=alibi",
                               local, "model.global_every=2"});
    Encoder model = build_model(config, *task);
    model->eval();
    const int64_t fused_before = fused_attention_forward_count();
    const auto fused = forward(model, batch).logits;
    CATCH_CHECK(fused_attention_forward_count() - fused_before == 4);  // every block fused
    ForwardRequest maps;
    maps.attentions = true;
    const auto unfused = forward(model, batch, maps);  // keeping maps: the unfused path
    CATCH_CHECK(torch::allclose(unfused.logits, fused, 1e-5, 1e-6));
    const int64_t T = batch.tokens.size(1);
    for (int64_t layer = 0; layer < 4; ++layer) {
      CATCH_CAPTURE(layer);
      const auto& probs = unfused.attentions[layer];  // (B, H, T, T)
      const bool is_local = layer % 2 == 0;           // blocks 1 and 3 global
      CATCH_CHECK(local_block(config.model, layer) == is_local);
      const auto hidden = AttentionMask(T, true, torch::kCPU).restricted({config.model.window, config.model.chunk})
                              .additive()
                              .isinf();
      const auto outside = probs.masked_select(hidden.expand_as(probs));
      if (is_local) CATCH_CHECK(outside.abs().max().item<float>() == 0.0f);
      else CATCH_CHECK(outside.abs().max().item<float>() > 0.0f);  // a global block sees past the window
    }
    // gradients through the fused path equal the unfused ones (the fused kernel reads the mask)
    model->train();
    auto loss_of = [&](bool keep_maps) {
      model->zero_grad();
      ForwardRequest request;
      request.attentions = keep_maps;
      forward(model, batch, request).logits.pow(2).mean().backward();
      std::vector<torch::Tensor> grads;
      for (const auto& p : model->parameters())
        if (p.grad().defined()) grads.push_back(p.grad().clone());
      return grads;
    };
    const auto fused_grads = loss_of(false), unfused_grads = loss_of(true);
    CATCH_REQUIRE(fused_grads.size() == unfused_grads.size());
    for (size_t i = 0; i < fused_grads.size(); ++i)
      CATCH_CHECK(torch::allclose(fused_grads[i], unfused_grads[i], 1e-4, 1e-6));
  }
}

#if TORCH_VERSION_MAJOR >= 2
CATCH_TEST_CASE("local attention: SDPA's branch equals the fused kernel", "[local]") {
  auto task = default_task("reverse_string", "causal_lm");
  Rng rng(2);
  const Batch batch = task->sample(2, 8, rng);
  auto config = tiny_config({"model.causal=true", "task.format=causal_lm", "model.window=3", "encoding.name=rope"});
  Encoder model = build_model(config, *task);
  model->eval();
  const auto fused = forward(model, batch).logits;
  use_sdpa_on_cpu(true);
  const auto sdpa = forward(model, batch).logits;
  use_sdpa_on_cpu(false);
  CATCH_CHECK(torch::allclose(sdpa, fused, 1e-5, 1e-6));
}
#endif

CATCH_TEST_CASE("local attention settings: checked, written only when set, read back", "[local][config]") {
  const auto plain = to_yaml(tiny_config());
  CATCH_CHECK_THAT(plain, !ContainsText("window"));
  CATCH_CHECK_THAT(plain, !ContainsText("encoding_heads"));
  const auto local = tiny_config({"model.causal=true", "model.chunk=8", "model.global_every=4",
                                  "model.logit_scaling=llama4", "model.logit_scaling_blocks=global"});
  const auto yaml = to_yaml(local);
  CATCH_CHECK_THAT(yaml, ContainsText("  logit_scaling_blocks: global\n  window: 0\n  chunk: 8\n  global_every: 4\n"));
  CATCH_CHECK(to_yaml(parse_run_config(yaml, "resolved.yaml", {}, scheme_catalog(), task_catalog())) == yaml);
  CATCH_CHECK_THROWS_WITH(tiny_config({"model.window=4", "model.chunk=4"}),
                          ContainsText("model.chunk: give window (a sliding window) or chunk (blocks), not both"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"model.global_every=4"}), ContainsText("set window or chunk"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"model.window=4", "model.global_every=1"}),
                          ContainsText("1 makes every block global"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"model.window=4", "model.logit_scaling=llama4",
                                       "model.logit_scaling_blocks=global"}),
                          ContainsText("set window or chunk, and global_every"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"model.window=4", "model.global_every=2", "model.logit_scaling_blocks=global"}),
                          ContainsText("there is no logit_scaling to restrict"));
  // the temperature only in the global blocks: per_head's parameters there alone
  auto task = default_task("reverse_string");
  auto per_head = tiny_config({"model.num_layers=4", "model.window=3", "model.global_every=2",
                               "model.logit_scaling=per_head", "model.logit_scaling_blocks=global"});
  const auto parameters = build_model(per_head, *task)->named_parameters();
  for (int64_t layer = 0; layer < 4; ++layer)
    CATCH_CHECK(parameters.contains("blocks." + std::to_string(layer) + ".attention.logit_scale") == (layer % 2 == 1));
}

CATCH_TEST_CASE("encoding_heads: checked, written only when set, read back", "[heads][config]") {
  const auto config = tiny_config({head_groups({{2, "alibi"}, {2, "none"}})});
  CATCH_REQUIRE(config.encoding_heads.size() == 2u);
  CATCH_CHECK((config.encoding_heads[0].heads == 2 && config.encoding_heads[0].encoding.name == "alibi"));
  const auto yaml = to_yaml(config);
  CATCH_CHECK_THAT(yaml, ContainsText("encoding_heads:\n  - num_heads: 2\n    name: alibi\n    heads: 0\n"));
  CATCH_CHECK(to_yaml(parse_run_config(yaml, "resolved.yaml", {}, scheme_catalog(), task_catalog())) == yaml);
  CATCH_CHECK_THROWS_WITH(tiny_config({head_groups({{2, "alibi"}, {1, "none"}})}),
                          ContainsText("encoding_heads: the groups have 3 heads; model.num_heads is 4"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"encoding.name=rope", head_groups({{2, "alibi"}, {2, "none"}})}),
                          ContainsText("the head groups replace encoding; leave encoding at none (it is 'rope')"));
  CATCH_CHECK_THROWS_WITH(tiny_config({"encoding_heads=[{name: alibi}, {num_heads: 4, name: none}]"}),
                          ContainsText("every head group needs num_heads"));
  CATCH_CHECK_THROWS_WITH(tiny_config({head_groups({{2, "nonesuch"}, {2, "none"}})}),
                          ContainsText("unknown encoding 'nonesuch'"));
  CATCH_CHECK_THROWS_WITH(tiny_config({head_groups({{2, "xpos"}, {2, "none"}})}),
                          ContainsText("'xpos' is defined for causal attention only"));
  auto task = default_task("reverse_string");
  CATCH_CHECK_THROWS_WITH(build_model(tiny_config({head_groups({{2, "sinusoidal"}, {2, "none"}})}), *task),
                          ContainsText("encoding_heads: 'sinusoidal' adds position vectors to the residual stream"));
  CATCH_CHECK_THROWS_WITH(build_model(tiny_config({head_groups({{2, "tupe"}, {2, "none"}})}), *task),
                          ContainsText("encoding_heads: 'tupe' and 'none' scale the scores differently"));
}

CATCH_TEST_CASE("NAPE as head groups equals alibi on the first heads (x-transformers' alibi_num_heads)", "[heads]") {
  auto task = default_task("reverse_string");
  Rng rng(6);
  const Batch batch = task->sample(3, 7, rng);
  for (bool causal : {false, true}) {
    const std::string mode = std::string("model.causal=") + (causal ? "true" : "false");
    Encoder groups = build_model(tiny_config({mode, head_groups({{2, "alibi"}, {2, "none"}})}), *task);
    Encoder alibi = build_model(tiny_config({mode, "encoding.name=alibi", "encoding.heads=2"}), *task);
    groups->eval();
    alibi->eval();
    CATCH_CHECK(torch::allclose(forward(groups, batch).logits, forward(alibi, batch).logits, 1e-5, 1e-6));
  }
}

CATCH_TEST_CASE("hard_alibi: head h sees first_window + h keys by the reference's rule, and Hard-ALiBi trains", "[heads]") {
  const int64_t T = 6, H = 3;
  for (bool causal : {false, true}) {
    EncodingContext context{32, H, 1, causal};
    OptionValues options = OptionValues::defaults(HardAlibiImpl::options());
    HardAlibiImpl scheme(context, options);
    const auto q = torch::randn({1, H, T, 8});
    const auto w = torch::randn({96, 32}), b = torch::randn({96});
    const auto positions = contiguous_positions(1, T);
    const auto bias = scheme.score_bias(q, q, {positions, 0, w, b});
    CATCH_REQUIRE(bias.sizes() == torch::IntArrayRef({1, H, T, T}));
    // by token index: positions with gaps give the same windows
    const auto gapped = torch::tensor({0, 5, 9, 20, 21, 40}, torch::kInt64).view({1, T});
    CATCH_CHECK(torch::equal(scheme.score_bias(q, q, {Positions(gapped, gapped), 0, w, b}), bias));
    // the reference: for head i, mask_head[:, j..T, 0..T-j] = 0 for j in 0..i, else finfo.min
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const int64_t offset = causal ? i - j : std::abs(i - j);
          const bool inside = offset <= h;  // (the causal mask hides j > i)
          CATCH_CHECK(bias[0][h][i][j].item<double>() == (inside ? 0.0 : HardAlibiImpl::kOutside));
        }
  }
  // the paper's model: hard windows on half the heads, NoPE on the rest, trains (every
  // parameter gets a gradient)
  auto task = default_task("copy", "causal_lm");
  auto config = tiny_config({"model.causal=true", "task.name=copy", "task.format=causal_lm", "train.steps=4",
                             "train.unused_parameters_steps=2", head_groups({{2, "hard_alibi"}, {2, "none"}})});
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  CATCH_CHECK_NOTHROW(trainer.train(log, false));
}

CATCH_TEST_CASE("every scheme as the only head group equals the scheme alone, values and gradients", "[heads][registry]") {
  auto task = default_task("reverse_string");
  Rng rng(12);
  const Batch batch = task->sample(2, 6, rng);
  for (const auto& mode : in_each_mode(all_scheme_variants())) {
    CATCH_CAPTURE(mode.label());
    RunConfig config = tiny_config_in_mode(mode.causal);
    Encoder alone = model_for(config, mode.variant, *task);
    if (alone->encoding().adds_to_residual()) continue;  // refused in a group (the test above)
    config.encoding_heads = {HeadGroupConfig{config.model.num_heads, {mode.variant.scheme, mode.variant.options}}};
    Encoder grouped = grouped_model(config, *task);
    // the same parameters (the group's scheme registers its own under group_0.)
    auto alone_parameters = alone->named_parameters();
    {
      torch::NoGradGuard no_grad;
      for (auto& item : grouped->named_parameters()) {
        const std::string own = own_name(item.key());
        CATCH_REQUIRE(alone_parameters.contains(own));
        item.value().copy_(alone_parameters[own]);
      }
    }
    const auto expected = forward(alone, batch).logits, got = forward(grouped, batch).logits;
    CATCH_CHECK(torch::allclose(got, expected, 1e-5, 1e-6));
    got.pow(2).sum().backward();
    expected.pow(2).sum().backward();
    for (auto& item : grouped->named_parameters()) {
      const std::string own = own_name(item.key());
      const auto& p = item.value();
      CATCH_CAPTURE(item.key());
      CATCH_CHECK(p.grad().defined() == alone_parameters[own].grad().defined());
      if (p.grad().defined()) CATCH_CHECK(torch::allclose(p.grad(), alone_parameters[own].grad(), 1e-4, 1e-5));
    }
  }
}

CATCH_TEST_CASE("every scheme in a head group beside NoPE heads: each head as its own scheme computes it", "[heads][registry]") {
  auto task = default_task("reverse_string");
  Rng rng(13);
  const Batch batch = task->sample(2, 6, rng);
  for (const auto& mode : in_each_mode(all_scheme_variants())) {
    CATCH_CAPTURE(mode.label());
    RunConfig config = tiny_config_in_mode(mode.causal);
    Encoder alone_model = model_for(config, mode.variant, *task);
    const auto& alone = alone_model->encoding();
    if (alone.adds_to_residual()) continue;
    if (std::abs(alone.attention_scale() - 1.0 / std::sqrt(double(config.model.d_model / config.model.num_heads))) >
        1e-12)
      continue;  // scaled apart from NoPE (deberta, tupe): refused beside none
    config.encoding_heads = {HeadGroupConfig{2, {mode.variant.scheme, mode.variant.options}},
                             HeadGroupConfig{2, {"none", {}}}};
    Encoder model = grouped_model(config, *task);
    ForwardRequest request;
    request.attentions = true;
    request.score_parts = true;
    const auto out = forward(model, batch, request);
    auto& groups = dynamic_cast<HeadGroupsImpl&>(model->encoding());
    auto& scheme = groups.group(0);
    const AttentionMask mask = AttentionMask(batch.padding, mode.causal);
    const auto positions = contiguous_positions(batch.tokens.size(0), batch.tokens.size(1));
    for (int64_t layer = 0; layer < config.model.num_layers; ++layer) {
      CATCH_CAPTURE(layer);
      const auto& record = out.score_parts[layer];
      const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1), D = config.model.d_model, Dh = D / 4;
      // the layer's projection, split into heads, and the group's rows of it
      const auto projected = torch::nn::functional::linear(record.input, record.qkv_weight, record.qkv_bias);
      auto heads = [&](int64_t third, int64_t first, int64_t count) {
        return projected.narrow(-1, third * D + first * Dh, count * Dh).reshape({B, T, count, Dh}).transpose(1, 2);
      };
      auto rows = [&](const torch::Tensor& t) {
        return torch::cat({t.narrow(0, 0, 2 * Dh), t.narrow(0, D, 2 * Dh), t.narrow(0, 2 * D, 2 * Dh)}, 0);
      };
      const auto weight = rows(record.qkv_weight), bias_rows = rows(record.qkv_bias);
      const AttentionContext own{positions, layer, weight, bias_rows, &record.input};
      auto [q, k] = scheme.rotate(heads(0, 0, 2), heads(1, 0, 2), own);
      auto scores = torch::matmul(q, k.transpose(-2, -1)) * scheme.attention_scale();
      const auto bias = scheme.score_bias(q, k, own);
      if (bias.defined()) scores = scores + bias;
      torch::Tensor probs;
      if (scheme.replaces_softmax_at(layer)) {
        probs = scheme.attention_weights(scores, mask.any() ? torch::isinf(mask.additive()) : torch::Tensor(), own);
      } else {
        probs = torch::softmax(mask.any() ? scores + mask.additive() : scores, -1);
      }
      CATCH_CHECK(torch::allclose(out.attentions[layer].narrow(1, 0, 2), probs, 1e-5, 1e-6));
      // the NoPE heads
      auto plain = torch::matmul(heads(0, 2, 2), heads(1, 2, 2).transpose(-2, -1)) / std::sqrt(double(Dh));
      if (mask.any()) plain = plain + mask.additive();
      CATCH_CHECK(torch::allclose(out.attentions[layer].narrow(1, 2, 2), torch::softmax(plain, -1), 1e-5, 1e-6));
    }
  }
}
