#include "core/run/scheme_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "core/config/yaml_reader.h"
#include "core/encodings/position_sampler.h"
#include "core/encodings/registry.h"
#include "core/io/hdf5_store.h"
#include "core/model/encoder.h"
#include "core/train/autocast.h"
#include "core/train/metrics.h"
#include "data/task_registry.h"

namespace pelab {

namespace {

const char* kCheckYaml = R"(
name: check
seed: 1
threads: 1
task: {name: reverse_string}
model: {d_model: 32, num_layers: 2, num_heads: 4, d_ff: 64, segment_embeddings: true}
encoding: {name: none}
)";

double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

std::string scientific(double v) { return fmt::format("{:.2g}", v); }

// Fixture: the model of a config, a task and positions as the setting asks.
struct Checker {
  RunConfig config;
  SchemeCheckSetting setting;
  std::unique_ptr<Task> task;

  Checker(RunConfig c, SchemeCheckSetting s) : config(std::move(c)), setting(s) {
    config.model.causal = setting.causal;
    task = make_task(config.task.name, config.task.options, config.task.format);
  }

  Encoder model(int64_t seed) const {
    torch::manual_seed(seed);
    Encoder m(config.model, config.encoding, task->vocab_size(), task->num_classes(), config.encoding_mix,
              config.encoding_heads);
    m->eval();
    return m;
  }

  Batch batch(int64_t size, int64_t length, uint64_t seed) const {
    Rng rng(seed);
    return task->sample(size, length, rng);
  }

  Positions positions(int64_t size, int64_t length) const {
    if (!setting.randomized) return contiguous_positions(size, length);
    PositionsConfig sampler;
    sampler.sampler = "randomized";
    sampler.max_length = 64;
    Rng rng(17);
    return PositionSampler(sampler).sample(size, length, rng, torch::kCPU);
  }

  EncoderOutput run(Encoder& m, const Batch& b, const Positions& p, const ForwardRequest& request = {}) const {
    return m->forward(b.tokens, b.padding, p, b.segments, request);
  }
  EncoderOutput run(Encoder& m, const Batch& b, const ForwardRequest& request = {}) const {
    return run(m, b, positions(b.tokens.size(0), b.tokens.size(1)), request);
  }
};

SchemeCheck finite(const Checker& c) {
  Encoder m = c.model(c.config.seed);
  m->train();
  Batch b = c.batch(4, 6, 5);
  auto out = c.run(m, b);
  score_batch(out.logits, b).loss.backward();
  int64_t bad = (~torch::isfinite(out.logits)).sum().item<int64_t>();
  int64_t bad_gradients = 0;
  for (const auto& p : m->parameters())
    if (p.grad().defined()) bad_gradients += (~torch::isfinite(p.grad())).sum().item<int64_t>();
  SchemeCheck check{"finite forward and backward", fmt::format("{} non-finite logits, {} gradients", bad, bad_gradients)};
  check.passed = bad == 0 && bad_gradients == 0;
  return check;
}

SchemeCheck padding_invariance(const Checker& c) {
  Encoder m = c.model(c.config.seed);
  Batch b = c.batch(4, 6, 11);
  const int64_t T = b.tokens.size(1);
  torch::NoGradGuard no_grad;
  const Positions padded_positions = c.positions(4, T + 5);  // real tokens keep theirs
  const Positions first{padded_positions.query.narrow(1, 0, T), padded_positions.key.narrow(1, 0, T)};
  auto plain = c.run(m, b, first, {true, false});
  auto more = c.run(m, b.padded(5), padded_positions, {true, false});
  const double logits = max_abs_difference(plain.logits, more.logits.narrow(1, 0, T));
  double padding_mass = 0.0;  // padding keys get exactly zero attention
  for (const auto& a : more.attentions) padding_mass = std::max(padding_mass, a.narrow(-1, T, 5).abs().max().item<double>());
  SchemeCheck check{"padding invariance",
                    "logits " + scientific(logits) + ", attention to padding " + scientific(padding_mass)};
  check.passed = torch::allclose(plain.logits, more.logits.narrow(1, 0, T), 1e-5, 1e-5) && padding_mass == 0.0;
  if (!check.passed) check.note = "outputs at real tokens change with the amount of padding";
  return check;
}

SchemeCheck no_future_leak(const Checker& c) {
  SchemeCheck check{"no leak from the future"};
  if (!c.setting.causal) {
    check.skipped = check.passed = true;
    check.note = "bidirectional";
    return check;
  }
  Batch b = c.batch(2, 6, 3);
  const int64_t T = b.tokens.size(1), t = 5;
  Batch changed = b;
  changed.tokens = b.tokens.clone();
  changed.tokens.narrow(1, t + 1, T - t - 1).fill_(Seq2SeqTask::kFirstSymbolToken + 1);
  changed.segments = torch::zeros_like(b.segments);
  torch::NoGradGuard no_grad;
  Encoder m = c.model(c.config.seed);
  const auto before = c.run(m, b).logits.narrow(1, 0, t + 1), after = c.run(m, changed).logits.narrow(1, 0, t + 1);
  const double leak = max_abs_difference(before, after);
  check.passed = torch::allclose(before, after, 1e-6, 1e-6);
  check.measured = "logits before t " + scientific(leak);
  if (!check.passed) check.note = "outputs at position t change with the tokens after t";
  // ... while a bidirectional model sees them (the check can fail)
  // (causal-only schemes have no bidirectional model: the encoding's, the mixed one's, a head group's)
  bool causal_only = find_entry(scheme_registry(), c.config.encoding.name, "position encoding").info.causal_only ||
                     find_entry(scheme_registry(), c.config.encoding_mix.encoding.name, "position encoding").info.causal_only;
  for (const auto& group : c.config.encoding_heads)
    causal_only = causal_only || find_entry(scheme_registry(), group.encoding.name, "position encoding").info.causal_only;
  if (!causal_only) {
    Checker bidirectional(c.config, {false, c.setting.randomized, c.setting.require_absolute});
    Encoder seeing = bidirectional.model(c.config.seed);
    const double seen = max_abs_difference(bidirectional.run(seeing, b).logits.narrow(1, 0, t + 1),
                                           bidirectional.run(seeing, changed).logits.narrow(1, 0, t + 1));
    check.measured += ", bidirectional " + scientific(seen);
    if (seen <= 1e-6) {
      check.passed = false;
      check.note = "the bidirectional model does not see the changed tokens either: the check tests nothing";
    }
  }
  return check;
}

SchemeCheck every_parameter_gradient(const Checker& c) {
  Encoder m = c.model(c.config.seed);
  m->train();
  Batch b = c.batch(4, 6, 5);
  score_batch(c.run(m, b).logits, b).loss.backward();
  std::vector<std::string> missing;
  int64_t count = 0;
  for (const auto& p : m->named_parameters()) {
    ++count;
    if (!p.value().grad().defined() || p.value().grad().abs().sum().item<double>() == 0.0) missing.push_back(p.key());
  }
  SchemeCheck check{"a gradient for every parameter", fmt::format("{} of {} without one", missing.size(), count)};
  check.passed = missing.empty();
  if (!missing.empty()) check.note = "no gradient: " + join(missing);
  return check;
}

SchemeCheck save_load(const Checker& c) {
  Encoder saved = c.model(c.config.seed);
  RunRecord record;
  record.config_yaml = to_yaml(c.config);
  record.checkpoint = checkpoint_of(*saved);
  std::random_device device;
  const auto path = std::filesystem::temp_directory_path() / ("pelab-check-" + std::to_string(device()) + ".h5");
  write_run_file(path.string(), record);
  Encoder loaded = c.model(c.config.seed + 12345);  // a differently initialised model ...
  Batch b = c.batch(3, 7, 9);
  torch::NoGradGuard no_grad;
  const bool differed = !torch::equal(c.run(saved, b).logits, c.run(loaded, b).logits);
  load_checkpoint(path.string(), *loaded);  // ... becomes the saved one
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  const double after = max_abs_difference(c.run(saved, b).logits, c.run(loaded, b).logits);
  SchemeCheck check{"save/load round trip", "logits after loading " + scientific(after)};
  check.passed = differed && after == 0.0;
  if (!differed) check.note = "a differently seeded model gave the same logits: the check tests nothing";
  else if (after != 0.0) check.note = "the loaded model's outputs differ from the saved one's";
  return check;
}

SchemeCheck shift_invariance(const Checker& c) {
  Encoder m = c.model(c.config.seed);
  Batch b = c.batch(2, 5, 3);
  const Positions plain = contiguous_positions(2, b.tokens.size(1));
  const Positions shifted{plain.query + 37, plain.key + 37};
  torch::NoGradGuard no_grad;
  auto a = c.run(m, b, plain, {true, false}), s = c.run(m, b, shifted, {true, false});
  double difference = max_abs_difference(a.logits, s.logits);
  bool close = torch::allclose(a.logits, s.logits, 1e-5, 1e-5);
  for (size_t l = 0; l < a.attentions.size(); ++l) {
    difference = std::max(difference, max_abs_difference(a.attentions[l], s.attentions[l]));
    close = close && torch::allclose(a.attentions[l], s.attentions[l], 1e-5, 1e-5);
  }
  SchemeCheck check{"shift invariance", "all positions + 37: " + scientific(difference)};
  if (m->encoding().shift_invariant()) {
    check.passed = close;
    if (!close) check.note = "declared shift invariant (relative), but shifting every position changes the outputs";
  } else if (c.setting.require_absolute) {
    check.passed = !close;
    if (close) check.note = "not declared shift invariant, yet shifting every position changes nothing";
  } else {
    check.passed = check.skipped = true;
    check.note = "not declared relative";
  }
  return check;
}

SchemeCheck score_terms_add_up(const Checker& c) {
  Encoder m = c.model(c.config.seed);
  Batch b = c.batch(2, 6, 13);
  torch::NoGradGuard no_grad;
  ForwardRequest request;
  request.score_parts = true;
  auto out = c.run(m, b, request);
  double worst = 0.0;
  int64_t layers_with_terms = 0;
  bool ok = true;
  for (size_t l = 0; l < out.score_parts.size(); ++l) {
    const auto& record = out.score_parts[l];
    const Positions p = c.positions(b.tokens.size(0), b.tokens.size(1));
    const AttentionContext context{p, static_cast<int64_t>(l), record.qkv_weight, record.qkv_bias, &record.input};
    const auto bias = m->encoding().score_bias(record.q, record.k, context);
    torch::Tensor sum;
    for (const auto& term : record.bias_terms) sum = sum.defined() ? sum + term.value : term.value;
    if (!bias.defined() && !sum.defined()) continue;
    ++layers_with_terms;
    if (bias.defined() != sum.defined()) {
      ok = false;
      continue;
    }
    const auto shape = at::infer_size(sum.sizes(), bias.sizes());  // the terms may broadcast otherwise
    const auto terms = sum.expand(shape), whole = bias.expand(shape);
    worst = std::max(worst, max_abs_difference(terms, whole));
    ok = ok && torch::allclose(terms, whole, 1e-5, 1e-5);
  }
  SchemeCheck check{"score terms add up to the bias", layers_with_terms ? "max |sum - bias| " + scientific(worst)
                                                                        : "no score bias"};
  check.passed = ok;
  if (!ok) check.note = "score_terms do not add up to score_bias";
  return check;
}

SchemeCheck float32_against_bf16(const Checker& c) {
  SchemeCheck check{"float32 against bf16"};
  if (!torch::cuda::is_available()) {
    check.passed = check.skipped = true;
    check.note = "no CUDA device";
    return check;
  }
  const torch::Device cuda(torch::kCUDA);
  Encoder m = c.model(c.config.seed);
  m->to(cuda);
  Batch b = c.batch(4, 8, 21).to(cuda);
  const Positions p = c.positions(4, b.tokens.size(1));
  const Positions on_device{p.query.to(cuda), p.key.to(cuda)};
  torch::NoGradGuard no_grad;
  const auto full = c.run(m, b, on_device).logits.to(torch::kFloat32).softmax(-1);
  torch::Tensor half;
  {
    AutocastScope autocast(true, cuda);
    half = c.run(m, b, on_device).logits.to(torch::kFloat32).softmax(-1);
  }
  const double difference = max_abs_difference(full, half);
  check.measured = "max |probability difference| " + scientific(difference);
  check.passed = std::isfinite(difference) && difference < 0.05;
  if (!check.passed) check.note = "bf16 probabilities differ from float32's by more than 0.05";
  return check;
}

}  // namespace

RunConfig check_scheme_config(const std::vector<std::string>& overrides, const std::vector<std::string>& scheme_files) {
  std::string yaml = kCheckYaml;
  if (!scheme_files.empty()) {
    yaml += "schemes: [";
    for (size_t i = 0; i < scheme_files.size(); ++i) {
      std::error_code error;
      yaml += (i ? ", \"" : "\"") + std::filesystem::weakly_canonical(std::filesystem::absolute(scheme_files[i]), error).string() + "\"";
    }
    yaml += "]\n";
  }
  return parse_run_config(yaml, "check-scheme", overrides, scheme_catalog(), task_catalog());
}

std::vector<SchemeCheck> check_scheme(const RunConfig& config, const SchemeCheckSetting& setting) {
  const Checker c(config, setting);
  return {finite(c),     padding_invariance(c), no_future_leak(c),     every_parameter_gradient(c),
          save_load(c),  shift_invariance(c),   score_terms_add_up(c), float32_against_bf16(c)};
}

std::string format_scheme_checks(const std::vector<SchemeCheck>& checks) {
  size_t property = 8, measured = 8;
  for (const auto& c : checks) {
    property = std::max(property, c.property.size());
    measured = std::max(measured, c.measured.size());
  }
  std::string text = fmt::format("{:<{}}  {:<{}}  result\n", "property", property, "measured", measured);
  for (const auto& c : checks)
    text += fmt::format("{:<{}}  {:<{}}  {}{}\n", c.property, property, c.measured, measured,
                        c.skipped ? "skipped" : c.passed ? "pass" : "FAIL", c.note.empty() ? "" : " (" + c.note + ")");
  return text;
}

}  // namespace pelab
