// Registry-wide tests: every registered scheme, in every choice of its options, in
// bidirectional and causal mode, passes the same invariants. A new scheme is tested by
// being registered.
#include "tests/catch.h"

#include <set>

#include "core/encodings/position_sampler.h"
#include "core/encodings/relative.h"
#include "core/io/hdf5_store.h"
#include "core/run/scheme_checks.h"
#include "core/config/yaml_reader.h"
#include "core/train/metrics.h"
#include "tests/support.h"

using namespace pelab;
using namespace pelab::test;

namespace {

// Every scheme variant, in each mode it is defined for, with contiguous and with randomized
// positions (Ruoss et al.: a sorted sample from [0, 64)).
struct Case {
  SchemeVariant variant;
  bool causal;
  bool randomized;
  std::string label() const { return SchemeMode{variant, causal}.label() + (randomized ? ", randomized positions" : ""); }
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& mode : in_each_mode(all_scheme_variants()))
    for (bool randomized : {false, true}) cases.push_back({mode.variant, mode.causal, randomized});
  return cases;
}

Positions positions_for(bool randomized, int64_t batch, int64_t length) {
  if (!randomized) return contiguous_positions(batch, length);
  PositionsConfig config;
  config.sampler = "randomized";
  config.max_length = 64;
  Rng rng(17);
  return PositionSampler(config).sample(batch, length, rng, torch::kCPU);
}

Batch sample_batch(const Task& task, int64_t batch, int64_t length, uint64_t seed) {
  Rng rng(seed);
  return task.sample(batch, length, rng);
}

EncoderOutput run(Encoder& model, const Batch& b, const Positions& positions, const ForwardRequest& request = {}) {
  return model->forward(b.tokens, b.padding, positions, b.segments, request);
}

EncoderOutput run(Encoder& model, const Batch& b, bool randomized = false, const ForwardRequest& request = {}) {
  return run(model, b, positions_for(randomized, b.tokens.size(0), b.tokens.size(1)), request);
}

}  // namespace

CATCH_TEST_CASE("the registry holds distinct scheme names, in name order, each with a description", "[registry]") {
  std::vector<std::string> names;
  for (const auto& e : scheme_registry()) {
    CATCH_CAPTURE(e.info.name);
    CATCH_CHECK_FALSE(e.info.description.empty());
    CATCH_CHECK(e.info.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos);
    names.push_back(e.info.name);
  }
  CATCH_CHECK(std::find(names.begin(), names.end(), "none") != names.end());  // the baseline every study needs
  CATCH_CHECK(std::is_sorted(names.begin(), names.end()));
  CATCH_CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

CATCH_TEST_CASE("the variants cover every registered scheme and every other value of its choice and bool options",
                "[registry]") {
  const auto variants = all_scheme_variants();
  std::set<std::string> labels;
  for (const auto& v : variants) labels.insert(v.label);
  for (const auto& e : scheme_registry()) {
    CATCH_CHECK(labels.count(e.info.name + " (defaults)") == 1);
    for (const auto& spec : e.info.options) {
      if (spec.kind == OptionKind::Bool)
        CATCH_CHECK(labels.count(e.info.name + " " + spec.name + "=" +
                                 format_option_value(!std::get<bool>(spec.default_value))) == 1);
      if (spec.kind == OptionKind::Choice)
        for (const auto& choice : spec.choices)
          if (choice != std::get<std::string>(spec.default_value))
            CATCH_CHECK(labels.count(e.info.name + " " + spec.name + "=" + choice) == 1);
    }
  }
}

CATCH_TEST_CASE("unknown scheme names list the known ones", "[registry]") {
  try {
    make_position_encoding("rotary_typo", EncodingContext{}, OptionValues{});
    CATCH_FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    std::vector<std::string> names;
    for (const auto& entry : scheme_registry()) names.push_back(entry.info.name);
    CATCH_CHECK_THAT(e.what(), test::ContainsText("unknown position encoding 'rotary_typo'") &&
                                   test::ContainsText("known: " + join(names)));
  }
}

CATCH_TEST_CASE("forward shapes, attention and hidden states of every scheme", "[registry]") {
  auto task = default_task("reverse_string");
  for (const auto& c : all_cases()) {
    CATCH_INFO(c.label());
    RunConfig config = tiny_config_in_mode(c.causal);
    Encoder model = model_for(config, c.variant, *task);
    Batch b = sample_batch(*task, 3, 5, 7);
    const int64_t T = b.tokens.size(1);
    auto out = run(model, b, c.randomized, {true, true});
    CATCH_CHECK(out.logits.sizes() == torch::IntArrayRef({3, T, task->num_classes()}));
    CATCH_REQUIRE(out.attentions.size() == 2u);
    CATCH_REQUIRE(out.hidden_states.size() == 3u);
    for (const auto& h : out.hidden_states) CATCH_CHECK(h.sizes() == torch::IntArrayRef({3, T, 32}));
    for (const auto& a : out.attentions) {
      CATCH_CHECK(a.sizes() == torch::IntArrayRef({3, 4, T, T}));
      if (!c.variant.scheme.empty() && c.variant.scheme == "stick_breaking")  // what the keys leave goes nowhere
        CATCH_CHECK((a.sum(-1) <= 1 + 1e-5).all().item<bool>());
      else
        CATCH_CHECK(torch::allclose(a.sum(-1), torch::ones({3, 4, T}), 1e-5, 1e-5));  // row-stochastic
      if (c.causal) CATCH_CHECK(a.triu(1).abs().max().item<float>() == 0.0f);      // nothing above the diagonal
    }
    CATCH_CHECK(torch::isfinite(out.logits).all().item<bool>());
  }
}

CATCH_TEST_CASE("what the host knows of positions and padding changes no scheme's outputs", "[registry]") {
  // The facts (PositionFacts) and a padding left undefined (none) spare a GPU's reads back;
  // without them the schemes inspect the tensors. Also contiguous positions from 5 on.
  auto task = default_task("reverse_string");
  for (const auto& c : all_cases()) {
    CATCH_INFO(c.label());
    RunConfig config = tiny_config_in_mode(c.causal);
    Encoder model = model_for(config, c.variant, *task);
    model->eval();
    Batch b = sample_batch(*task, 3, 5, 7);
    CATCH_REQUIRE_FALSE(b.padding.any().item<bool>());
    const int64_t T = b.tokens.size(1);
    std::vector<Positions> all = {positions_for(c.randomized, 3, T)};
    if (!c.randomized) all.push_back(shared_row_positions(torch::arange(T, torch::kInt64) + 5, 3, torch::kCPU));
    for (const auto& with_facts : all) {
      CATCH_REQUIRE(with_facts.known_facts() != nullptr);
      const Positions without{with_facts.query, with_facts.key};
      CATCH_REQUIRE(without.known_facts() == nullptr);
      const auto expected = run(model, b, without).logits;
      CATCH_CHECK(torch::equal(model->forward(b.tokens, torch::Tensor(), with_facts, b.segments).logits, expected));
      CATCH_CHECK(torch::equal(run(model, b, with_facts).logits, expected));
    }
  }
}

CATCH_TEST_CASE("every offset of the sampler's range gives the outputs and gradients of those that occur",
                "[registry][relative]") {
  // The GPU's search (OffsetSearch::bounded: every offset in [-63, 63], nothing read back)
  // against the CPU's (the distinct offsets of the draw), for every scheme.
  auto task = default_task("reverse_string");
  for (const auto& c : all_cases()) {
    if (!c.randomized) continue;
    CATCH_INFO(c.label());
    Encoder model = model_for(tiny_config_in_mode(c.causal), c.variant, *task);
    model->eval();
    Batch b = sample_batch(*task, 3, 6, 9);
    auto forward_backward = [&] {  // the logits, then every parameter's gradient
      model->zero_grad();
      auto logits = run(model, b, true).logits;
      score_batch(logits, b).loss.backward();
      std::vector<torch::Tensor> out = {logits.detach()};
      for (const auto& p : model->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros({1}));
      return out;
    };
    const auto distinct = forward_backward();
    std::vector<torch::Tensor> bounded;
    {
      OffsetSearchScope every_offset(OffsetSearch::bounded);
      bounded = forward_backward();
    }
    for (size_t i = 0; i < distinct.size(); ++i) {
      CATCH_INFO("tensor " << i << " (0: logits, then the parameters' gradients)");
      CATCH_CHECK(torch::allclose(bounded[i], distinct[i], 1e-5, 1e-6));
    }
  }
}

CATCH_TEST_CASE("positions drawn on the host carry what the host knows of them", "[registry]") {
  const auto contiguous = shared_row_positions(torch::arange(4, torch::kInt64) + 3, 2, torch::kCPU);
  const PositionFacts* facts = contiguous.known_facts();
  CATCH_REQUIRE(facts != nullptr);
  CATCH_CHECK(facts->contiguous);
  CATCH_CHECK(facts->smallest == 3);
  CATCH_CHECK(facts->largest == 6);
  CATCH_CHECK(contiguous.query.stride(0) == 0);
  const auto sparse = shared_row_positions(torch::tensor({0, 2, 9}, torch::kInt64), 2, torch::kCPU);
  CATCH_REQUIRE(sparse.known_facts() != nullptr);
  CATCH_CHECK_FALSE(sparse.known_facts()->contiguous);
  CATCH_CHECK(sparse.known_facts()->largest == 9);
  const auto from_zero = contiguous_positions(2, 5);
  CATCH_REQUIRE(from_zero.known_facts() != nullptr);
  CATCH_CHECK(from_zero.known_facts()->contiguous);
  CATCH_CHECK(from_zero.known_facts()->largest == 4);
  // shifted positions are other tensors: the facts no longer apply
  Positions shifted = contiguous;
  shifted.query = shifted.query + 10;
  CATCH_CHECK(shifted.known_facts() == nullptr);
  CATCH_CHECK(Positions(contiguous).known_facts() != nullptr);  // a copy holds the same tensors
}

CATCH_TEST_CASE("a causal-only scheme refuses bidirectional attention, in the config and in C++", "[registry]") {
  for (const auto& e : scheme_registry()) {
    if (!e.info.causal_only) continue;
    CATCH_INFO(e.info.name);
    EncodingContext bidirectional{32, 4, 2, false};
    CATCH_CHECK_THROWS_WITH(e.factory(bidirectional, OptionValues::defaults(e.info.options)),
                            test::ContainsText("causal attention only") &&
                                test::ContainsText("set model.causal: true"));
    try {
      tiny_config({"encoding.name=" + e.info.name});
      CATCH_FAIL("the config loader accepted a bidirectional " << e.info.name);
    } catch (const ConfigError& error) {
      CATCH_CHECK(std::string(error.what()) == "--set encoding.name=" + e.info.name + ": encoding.name: '" +
                                                   e.info.name +
                                                   "' is defined for causal attention only; set model.causal: true");
    }
  }
}

// Padding invariance, no leak from the future, a gradient for every parameter, the save/load
// round trip, shift invariance (both ways), score terms adding up: core/run/scheme_checks.h,
// the implementation `pelab check-scheme` runs on any scheme.
CATCH_TEST_CASE("every scheme has the properties pelab check-scheme measures", "[registry]") {
  for (const auto& c : all_cases()) {
    CATCH_INFO(c.label());
    RunConfig config = tiny_config_in_mode(c.causal);
    config.model.segment_embeddings = true;
    config.encoding.name = c.variant.scheme;
    config.encoding.options = c.variant.options;
    for (const auto& check : check_scheme(config, {c.causal, c.randomized, /*require_absolute=*/true})) {
      CATCH_INFO(check.property << ": " << check.measured << (check.note.empty() ? "" : " (" + check.note + ")"));
      CATCH_CHECK(check.passed);
    }
  }
}

CATCH_TEST_CASE("deberta refuses bucket settings its option ranges let through", "[registry]") {
  const auto& entry = find_entry(scheme_registry(), "deberta", "scheme");
  const auto& deberta = entry.factory;
  auto deberta_options = OptionValues::defaults(entry.info.options);
  const EncodingContext context{32, 4, 2, false};
  deberta_options.set("position_buckets", int64_t{1});  // a bucket size of 1 has no exact distances
  CATCH_CHECK_THROWS_WITH(deberta(context, deberta_options),
                          test::ContainsText("deberta: position_buckets must be 0 (exact distances) or at least 2, got 1"));
  deberta_options.set("position_buckets", int64_t{2});
  CATCH_CHECK_NOTHROW(deberta(context, deberta_options));
  // the log buckets must reach past the exact distances
  deberta_options.set("position_buckets", int64_t{8});
  deberta_options.set("max_relative_positions", int64_t{5});
  CATCH_CHECK_THROWS_WITH(deberta(context, deberta_options),
                          test::ContainsText("deberta: max_relative_positions (5) must exceed position_buckets / 2 + 1 = 5"));
  deberta_options.set("max_relative_positions", int64_t{6});
  CATCH_CHECK_NOTHROW(deberta(context, deberta_options));
}
