// Attention statistics and maps, and the linear position probes.
#include "tests/catch.h"

#include <cmath>
#include <map>
#include <sstream>

#include "core/analysis/attention_summary.h"
#include "core/analysis/probes.h"
#include "core/analysis/score_terms.h"
#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "core/train/trainer.h"
#include "data/task_registry.h"
#include "tests/support.h"

using namespace pelab;

CATCH_TEST_CASE("attention statistics of uniform and one-hot attention", "[analysis]") {
  const int64_t T = 4;
  auto uniform = torch::full({1, 1, T, T}, 0.25);
  auto identity = torch::eye(T).view({1, 1, T, T});
  AttentionSummaryAccumulator acc;
  acc.add({uniform, identity}, torch::zeros({1, T}, torch::kBool));  // layer 0 uniform, layer 1 identity
  AttentionSummary s = acc.summary();
  CATCH_REQUIRE((s.layers == 2 && s.heads == 1));
  // mean over queries of mean |i - j|: (1.5 + 1 + 1 + 1.5) / 4
  CATCH_CHECK(s.mean_distance[0] == Approx(1.25));
  CATCH_CHECK(s.entropy[0] == Approx(std::log(4.0)));
  CATCH_CHECK(s.diagonal[0] == Approx(0.25));
  CATCH_CHECK(s.first[0] == Approx(0.25));
  CATCH_CHECK(s.last[0] == Approx(0.25));
  CATCH_CHECK(s.mean_distance[1] == Approx(0.0));
  CATCH_CHECK(s.entropy[1] == Approx(0.0).margin(1e-12));
  CATCH_CHECK(s.diagonal[1] == Approx(1.0));
  CATCH_CHECK(s.first[1] == Approx(0.25));  // only query 0 attends to token 0
  // padding: the last two tokens of a second row are padding; its queries 0-1 attend to 0-1
  auto padded = torch::tensor({0.5, 0.5, 0.0, 0.0}).view({1, 1, 1, T}).expand({1, 1, T, T}).clone();
  AttentionSummaryAccumulator with_padding;
  with_padding.add({padded}, torch::tensor({false, false, true, true}).view({1, T}));
  AttentionSummary p = with_padding.summary();
  CATCH_CHECK(p.last[0] == Approx(0.5));            // the last non-padding token is token 1
  CATCH_CHECK(p.mean_distance[0] == Approx(0.5));   // queries 0 and 1 only: (0.5 + 0.5) / 2
}

CATCH_TEST_CASE("the CPU pass over attention gives the statistics of the tensor form", "[analysis]") {
  torch::manual_seed(3);
  const int64_t B = 5, H = 3, T = 9;
  auto p = torch::softmax(torch::randn({B, H, T, T}) * 3, -1);
  p.index_put_({1, 2, 4}, torch::zeros({T}));  // rows with zeros: 0 log 0 counts as 0
  p.index_put_({1, 2, 4, 3}, 1.0);
  auto padding = torch::zeros({B, T}, torch::kBool);
  padding.index_put_({2, torch::indexing::Slice(6)}, true);  // example 2 ends at token 5
  padding.index_put_({4, torch::indexing::Slice(1)}, true);  // example 4 is one token
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  const auto fast = attention_statistic_sums(p, padding);
  const auto reference = attention_statistic_sums_torch(p, padding);
  CATCH_REQUIRE(fast.sizes() == torch::IntArrayRef({5, H}));
  CATCH_CHECK(torch::allclose(fast, reference, 1e-9, 1e-12));
  torch::set_num_threads(1);  // the same numbers on one thread, bit for bit
  CATCH_CHECK(torch::equal(attention_statistic_sums(p, padding), fast));
  torch::set_num_threads(threads);
}

CATCH_TEST_CASE("stored attention maps are row-stochastic, causal maps have no mass above the diagonal",
                "[analysis]") {
  for (const bool causal : {false, true}) {
    CATCH_INFO((causal ? "causal" : "bidirectional"));
    auto config = test::tiny_config({std::string("model.causal=") + (causal ? "true" : "false"),
                                     "encoding.name=alibi"});
    auto task = test::default_task("reverse_string");
    Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
    AttentionMaps maps = trainer.evaluator().attention_maps(5, 3);
    CATCH_REQUIRE(maps.probs.sizes() == torch::IntArrayRef({3, 2, 4, 10, 10}));  // N, layers, heads, T, T
    CATCH_CHECK(maps.tokens.sizes() == torch::IntArrayRef({3, 10}));
    CATCH_CHECK(torch::allclose(maps.probs.sum(-1), torch::ones({3, 2, 4, 10}), 1e-5, 1e-5));
    CATCH_CHECK(torch::equal(maps.positions[0], torch::arange(10)));
    if (causal) CATCH_CHECK(maps.probs.triu(1).abs().max().item<float>() == 0.0f);
    else CATCH_CHECK(maps.probs.triu(1).abs().max().item<float>() > 0.0f);
  }
  // padding keys get no attention
  auto config = test::tiny_config({"encoding.name=rope"});
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  model->eval();
  Rng rng(3);
  Batch b = task->sample(2, 4, rng).padded(3);
  ForwardRequest request;
  request.attentions = true;
  auto out = model->forward(b.tokens, b.padding, contiguous_positions(2, 11), b.segments, request);
  for (const auto& probs : out.attentions) {
    CATCH_CHECK(probs.narrow(-1, 8, 3).abs().max().item<float>() == 0.0f);
    CATCH_CHECK(torch::allclose(probs.narrow(2, 0, 8).sum(-1), torch::ones({2, 4, 8}), 1e-5, 1e-5));
  }
}

CATCH_TEST_CASE("ridge regression recovers a linear map", "[analysis][probes]") {
  torch::manual_seed(0);
  auto x = torch::randn({200, 5}, torch::kFloat64);
  auto w = torch::randn({5, 2}, torch::kFloat64);
  auto y = x.mm(w) + 3.0;
  auto x_test = torch::randn({20, 5}, torch::kFloat64);
  auto predicted = ridge_predict(x, y, x_test, 1e-10);
  CATCH_CHECK(torch::allclose(predicted, x_test.mm(w) + 3.0, 1e-6, 1e-6));
}

CATCH_TEST_CASE("the one-hot ridge in closed form equals the dense ridge on one-hot features", "[analysis][probes]") {
  torch::manual_seed(1);
  const int64_t vocab = 12;  // ids 10 and 11 never drawn in the fit rows: columns of zeros
  const auto fit = torch::randint(0, 10, {300}, torch::kInt64), test = torch::randint(0, vocab, {40}, torch::kInt64);
  const auto y = torch::randn({300, 3}, torch::kFloat64) + fit.to(torch::kFloat64).unsqueeze(1);
  for (double ridge : {1e-3, 0.5}) {
    CATCH_INFO("ridge " << ridge);
    const auto dense = ridge_predict(torch::one_hot(fit, vocab), y, torch::one_hot(test, vocab), ridge);
    const auto closed = one_hot_ridge_predict(fit, y, test, vocab, ridge);
    CATCH_CHECK(torch::allclose(closed, dense, 1e-9, 1e-9));
  }
}

CATCH_TEST_CASE("probes: learned and sinusoidal positions are decodable from the embeddings, none is at chance",
                "[analysis][probes]") {
  for (const std::string scheme : {"learned", "sinusoidal", "none"}) {
    CATCH_INFO(scheme);
    auto config = test::tiny_config({"encoding.name=" + scheme, "model.d_model=64", "analysis.probe_examples=256"});
    auto task = test::default_task("reverse_string");
    Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
    auto results = trainer.evaluator().probes(8);  // T = 16
    CATCH_REQUIRE(results.size() == 3u);  // the embeddings and 2 blocks
    const ProbeResult& embedding = results.front();
    CATCH_INFO("accuracy " << embedding.position_accuracy << ", chance " << embedding.position_chance);
    // the tokens alone tell the input half from the placeholder half: 2 of 16 positions
    CATCH_CHECK(embedding.position_chance == Approx(2.0 / 16).margin(0.03));
    if (scheme == "none") {
      for (const auto& r : results) CATCH_CHECK(r.position_accuracy <= r.position_chance + 0.03);
    } else {
      CATCH_CHECK(embedding.position_accuracy > 0.9);
      // a linear read-out of position itself: exact for sinusoids up to the ridge penalty; random
      // learned rows carry position as 16 unrelated vectors, which a line fits less well
      CATCH_CHECK(embedding.position_r2 > (scheme == "sinusoidal" ? 0.9 : 0.5));
      CATCH_CHECK(embedding.order_accuracy > 0.9);
    }
  }
}

CATCH_TEST_CASE("a causal NoPE model with a BOS token carries absolute position (Kazemnejad et al.)",
                "[analysis][probes][bos]") {
  // Untrained: attention near uniform over the prefix, so the BOS token's value enters query i
  // with weight about 1 / (i + 1), a position signal a linear probe reads (the NoPE paper's
  // construction); without BOS the first token's value is a random symbol's and the signal blurs.
  std::map<bool, double> r2;  // position R^2 after the first block
  for (const bool bos : {false, true}) {
    CATCH_INFO("bos " << bos);
    std::vector<std::string> overrides = {"encoding.name=none", "model.causal=true", "task.format=causal_lm",
                                          "task.name=copy", "model.d_model=64", "analysis.probe_examples=256"};
    if (bos) overrides.push_back("task.bos=true");
    auto config = test::tiny_config(overrides);
    auto task = make_task(config.task.name, config.task.options, config.task.format, config.task.bos);
    Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
    auto results = trainer.evaluator().probes(8);
    const ProbeResult& block = results[1];  // after the first attention
    CATCH_INFO("accuracy " << block.position_accuracy << ", chance " << block.position_chance);
    r2[bos] = block.position_r2;
    // measured: with BOS R^2 0.68, order 0.87, accuracy 0.26 (chance 0.17); without 0.26, 0.68, 0.19
    if (bos) {
      CATCH_CHECK(block.position_r2 > 0.5);
      CATCH_CHECK(block.order_accuracy > 0.8);
      CATCH_CHECK(block.position_accuracy > block.position_chance + 0.05);
    }
  }
  CATCH_CHECK(r2[true] > r2[false] + 0.2);
}

CATCH_TEST_CASE("a run stores attention statistics, maps and probes, and reads them back", "[analysis][hdf5]") {
  test::TemporaryDirectory dir;
  auto config = test::tiny_config({"output.dir=" + dir.path, "encoding.name=sinusoidal", "analysis.probe_examples=16"});
  std::ostringstream log;
  RunOutcome outcome = execute_run(config, log, false);
  CATCH_CHECK_THAT(log.str(), test::ContainsText("position probes at length 6"));
  RunRecord record = read_run_file(outcome.run_file, false);
  CATCH_REQUIRE(record.evaluation.size() == 2u);
  for (size_t i = 0; i < 2; ++i) {
    const AttentionSummary& stored = record.evaluation[i].attention;
    CATCH_REQUIRE((stored.layers == 2 && stored.heads == 4));
    CATCH_CHECK(stored.entropy == outcome.evaluation[i].attention.entropy);
    CATCH_CHECK(stored.last == outcome.evaluation[i].attention.last);
    for (double d : stored.diagonal) CATCH_CHECK((d >= 0 && d <= 1));
  }
  CATCH_REQUIRE(record.probes.size() == 3u);  // length 6 (the training max) x 3 representations
  CATCH_CHECK(record.probes[2].layer == 2);
  CATCH_CHECK(record.probes[0].length == 6);
  CATCH_CHECK(attention_map_lengths(config, *test::default_task("reverse_string")) == std::vector<int64_t>{6, 8});
}

// ---------------------------------------------------------------- the attention terms

namespace {

// The model's forwards the analysis takes: with score parts, and for an additive scheme the
// content-only one. Returns {parts, content}.
std::pair<std::vector<AttentionRecord>, std::vector<AttentionRecord>> score_parts_of(Encoder& model, const Batch& b,
                                                                                     const Positions& positions) {
  ForwardRequest request;
  request.attentions = true;
  request.score_parts = true;
  auto parts = model->forward(b.tokens, b.padding, positions, b.segments, request).score_parts;
  std::vector<AttentionRecord> content;
  if (model->encoding().adds_to_residual()) {
    ForwardRequest without;
    without.score_parts = true;
    without.position_embeddings = false;
    content = model->forward(b.tokens, b.padding, positions, b.segments, without).score_parts;
  }
  return {parts, content};
}

}  // namespace

CATCH_TEST_CASE("the attention terms of every scheme add up to its scores", "[analysis][terms][registry]") {
  auto task = test::default_task("reverse_string");
  for (const auto& mode : test::in_each_mode(test::all_scheme_variants())) {
    CATCH_INFO(mode.label());
    Encoder model = test::model_for(test::tiny_config_in_mode(mode.causal), mode.variant, *task);
    Rng rng(5);
    Batch b = task->sample(2, 4, rng).padded(2);  // padding keys: the softmax's mask
    const int64_t T = b.tokens.size(1);
    torch::NoGradGuard no_grad;
    const auto [parts, content] = score_parts_of(model, b, contiguous_positions(2, T));
    const AttentionMask mask(b.padding, mode.causal);
    for (size_t l = 0; l < parts.size(); ++l) {
      auto terms = layer_score_terms(parts[l], content.empty() ? nullptr : &content[l]);
      auto scores = torch::zeros({2, 4, T, T});
      for (const auto& t : terms) scores = scores + t.value;
      // schemes that replace the softmax (stick_breaking) make the weights from the same scores
      const auto positions = contiguous_positions(2, T);
      const torch::Tensor unused;
      const auto weights = model->encoding().replaces_softmax_at(static_cast<int64_t>(l))
                               ? model->encoding().attention_weights(scores, torch::isinf(mask.additive()),
                                                                     AttentionContext{positions, static_cast<int64_t>(l), unused, unused})
                               : torch::softmax(scores + mask.additive(), -1);
      CATCH_CHECK(torch::allclose(weights, parts[l].probs, 1e-5, 1e-6));
      const bool split = model->encoding().adds_to_residual() && !parts[l].rotated;
      CATCH_CHECK(terms.front().name == (split ? "content-content" : parts[l].rotated ? "rotated q.k" : "content-content"));
      CATCH_CHECK(terms.size() == parts[l].bias_terms.size() + (split ? 4 : 1));
    }
  }
}

CATCH_TEST_CASE("attention terms vanish with a zero position table and a zero bias", "[analysis][terms]") {
  auto task = test::default_task("reverse_string");
  Rng rng(7);
  Batch b = task->sample(3, 5, rng);
  const auto positions = contiguous_positions(3, 10);
  auto statistics = [&](const std::string& scheme, const std::string& zeroed) {
    Encoder model = test::model_for(test::tiny_config(), test::scheme_variant(scheme, {}), *task);
    torch::NoGradGuard no_grad;
    if (!zeroed.empty()) model->encoding().named_parameters()[zeroed].zero_();
    const auto [parts, content] = score_parts_of(model, b, positions);
    return score_term_statistics(parts, content, b.padding, false);
  };
  auto column = [](const ScoreTermStatistics& s, const std::string& name) {
    const auto n = std::find(s.names.begin(), s.names.end(), name) - s.names.begin();
    CATCH_REQUIRE(n < static_cast<int64_t>(s.names.size()));
    return std::make_pair(s.mean_abs.select(2, n), s.correlation.select(2, n));  // (layers, heads)
  };
  const std::vector<std::string> four = {"content-content", "content-position", "position-content",
                                         "position-position"};
  // learned with a zero table: the position part of every layer's input is exactly zero
  const auto zero_table = statistics("learned", "table");
  CATCH_CHECK(zero_table.names == four);
  CATCH_CHECK(torch::allclose(column(zero_table, "content-content").first, zero_table.scores_mean_abs));
  CATCH_CHECK(column(zero_table, "content-content").second.min().item<double>() == Approx(1.0));
  for (const char* name : {"content-position", "position-content", "position-position"}) {
    CATCH_CHECK(column(zero_table, name).first.abs().max().item<double>() == 0.0);
    CATCH_CHECK(torch::isnan(column(zero_table, name).second).all().item<bool>());  // a constant has no r
  }
  // sinusoidal: every term is there
  const auto sinusoidal = statistics("sinusoidal", "");
  for (const auto& name : four) CATCH_CHECK(column(sinusoidal, name).first.min().item<double>() > 0.0);
  // t5_bias with a zero table: the bias is there and weighs nothing
  const auto zero_bias = statistics("t5_bias", "relative_attention_bias");
  CATCH_CHECK(zero_bias.names == std::vector<std::string>{"content-content", "position bias"});
  CATCH_CHECK(column(zero_bias, "position bias").first.abs().max().item<double>() == 0.0);
  CATCH_CHECK(statistics("t5_bias", "").mean_abs.select(2, 1).min().item<double>() > 0.0);
  // the relative family keeps its own terms; rotary mixes them
  CATCH_CHECK(statistics("deberta", "").names ==
              std::vector<std::string>{"content-content", "content-position", "position-content"});
  CATCH_CHECK(statistics("transformer_xl", "").names ==
              std::vector<std::string>{"content-content", "content-position", "global content", "global position"});
  CATCH_CHECK(statistics("rope", "").names == std::vector<std::string>{"rotated q.k"});
}

CATCH_TEST_CASE("attention-term statistics of a hand-computed layer", "[analysis][terms]") {
  // one head, T = 2, Dh = 1, scale 1: q = (1, 2), k = (1, -1) give q.k = [[1, -1], [2, -2]];
  // a bias of -q.k / 2 makes the scores q.k / 2
  AttentionRecord layer;
  layer.q = torch::tensor({1.0, 2.0}).view({1, 1, 2, 1});
  layer.k = torch::tensor({1.0, -1.0}).view({1, 1, 2, 1});
  layer.scale = 1.0;
  layer.bias_terms = {{"position bias", torch::tensor({{-0.5, 0.5}, {-1.0, 1.0}}).view({1, 1, 2, 2})}};
  const auto all_pairs = score_term_statistics({layer}, {}, torch::Tensor(), false);
  CATCH_CHECK(all_pairs.mean_abs[0][0][0].item<double>() == Approx(1.5));    // (1 + 1 + 2 + 2) / 4
  CATCH_CHECK(all_pairs.mean_abs[0][0][1].item<double>() == Approx(0.75));
  CATCH_CHECK(all_pairs.scores_mean_abs[0][0].item<double>() == Approx(0.75));
  CATCH_CHECK(all_pairs.correlation[0][0][0].item<double>() == Approx(1.0));
  CATCH_CHECK(all_pairs.correlation[0][0][1].item<double>() == Approx(-1.0));
  // causal: the pair (0, 1) is not scored; padding the second token leaves the pair (0, 0)
  const auto causal = score_term_statistics({layer}, {}, torch::Tensor(), true);
  CATCH_CHECK(causal.mean_abs[0][0][0].item<double>() == Approx(5.0 / 3));  // (1 + 2 + 2) / 3
  const auto padded = score_term_statistics({layer}, {}, torch::tensor({false, true}).view({1, 2}), false);
  CATCH_CHECK(padded.mean_abs[0][0][0].item<double>() == Approx(1.0));
  CATCH_CHECK(std::isnan(padded.correlation[0][0][0].item<double>()));  // one pair: no spread
  // a window of 1 token scores the diagonal only: (1 + 2) / 2; so does a bias that masks the
  // other pairs (hard_alibi's -1e9), whose own mean is then 0
  const auto windowed = score_term_statistics({layer}, {}, torch::Tensor(), false, {LocalAttention{1, 0}});
  CATCH_CHECK(windowed.mean_abs[0][0][0].item<double>() == Approx(1.5));
  CATCH_CHECK(windowed.mean_abs[0][0][1].item<double>() == Approx(0.75));  // (0.5 + 1) / 2
  AttentionRecord hard = layer;
  hard.bias_terms = {{"position bias", torch::tensor({{0.0, -1e9}, {-1e9, 0.0}}).view({1, 1, 2, 2})}};
  const auto masked = score_term_statistics({hard}, {}, torch::Tensor(), false);
  CATCH_CHECK(masked.mean_abs[0][0][0].item<double>() == Approx(1.5));
  CATCH_CHECK(masked.mean_abs[0][0][1].item<double>() == Approx(0.0));
}
