#include "core/train/evaluator.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "core/encodings/position_sampler.h"
#include "core/train/metrics.h"

namespace pelab {

uint64_t evaluation_data_seed(int64_t run_seed, int64_t length) {
  return (static_cast<uint64_t>(run_seed) * 0x100000001B3ull) ^ (0xE7A1ull << 40) ^ static_cast<uint64_t>(length);
}

// Positions get their own stream beside each data stream, so that a sampler leaves the
// data of a seed unchanged.
uint64_t position_stream_seed(uint64_t data_seed) { return data_seed ^ 0x5A5A5A5Aull; }

std::pair<std::string, int64_t> evaluation_sampler(const PositionsConfig& positions) {
  if (positions.evaluate_with == "contiguous" || positions.sampler == "contiguous" ||
      PositionSampler(positions).training_only())
    return {"contiguous", 0};
  return {positions.sampler, positions.max_length};
}

std::vector<uint8_t> flags_on_host(const torch::Tensor& flags) {
  const auto bytes = flags.to(torch::kCPU, torch::kUInt8).contiguous();
  return std::vector<uint8_t>(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
}

namespace {

// n bytes on the host -> (n,) bool on `device`: flags_on_host's way back
torch::Tensor flags_on_device(std::vector<uint8_t> bytes, torch::Device device) {
  return torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8).to(device, torch::kBool);
}

// grad: (rows, ...) -> (rows,) bool: the rows with a nonzero entry
torch::Tensor rows_with_gradient(const torch::Tensor& grad) { return grad.ne(0).reshape({grad.size(0), -1}).any(1); }

// 3, 4, 5, 9 -> "3..5, 9"
std::string value_ranges(const std::vector<int64_t>& sorted_values) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted_values.size();) {
    size_t j = i;
    while (j + 1 < sorted_values.size() && sorted_values[j + 1] == sorted_values[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(sorted_values[i])
                           : fmt::format("{}..{}", sorted_values[i], sorted_values[j]));
    i = j + 1;
  }
  return join(parts);
}

}  // namespace

Evaluator::Evaluator(const RunConfig& config, Encoder model, const Task& task, torch::Device device)
    : config_(config), sampler_(config.positions), model_(std::move(model)), task_(task), device_(device) {
  auto scheme_parameters = model_->encoding().named_parameters();
  for (const auto& t : model_->encoding().position_tables()) {
    const torch::Tensor table = scheme_parameters[t.parameter];
    tables_.push_back({"position_encoding." + t.parameter, t.row_kind, t.first_row_value, table,
                       torch::zeros({table.size(0)}, torch::TensorOptions(torch::kBool).device(table.device()))});
  }
}

void Evaluator::mark_trained_rows() {
  for (auto& t : tables_)
    if (t.table.grad().defined()) t.trained.logical_or_(rows_with_gradient(t.table.grad()));
}

std::vector<TrainedRows> Evaluator::trained_rows() const {
  std::vector<TrainedRows> rows;
  for (const auto& t : tables_) rows.push_back({t.parameter, t.row_kind, t.first_row_value, flags_on_host(t.trained)});
  return rows;
}

void Evaluator::set_trained_rows(const std::vector<TrainedRows>& rows) {
  for (auto& t : tables_)
    for (const auto& r : rows)
      if (r.parameter == t.parameter) {
        if (static_cast<int64_t>(r.trained.size()) != t.trained.size(0))
          throw std::runtime_error(fmt::format("trained rows of {}: {} rows stored, the table has {}", t.parameter,
                                               r.trained.size(), t.trained.size(0)));
        t.trained = flags_on_device(r.trained, t.trained.device());
      }
}

std::string Evaluator::untrained_rows_used(const Batch& batch, const Positions& positions) {
  if (tables_.empty()) return "";
  torch::AutoGradMode with_gradients(true);
  std::vector<torch::Tensor> tables;
  for (const auto& t : tables_) tables.push_back(t.table);
  torch::Tensor output;
  {
    const auto scope = autocast();
    // the scored outputs, as training's loss: a row is used when a scored prediction depends
    // on it, which is when training would have updated it
    const auto logits = model_->forward(batch.tokens, batch.padding, positions, batch.segments).logits;
    output = (logits.to(torch::kFloat32).sum(-1) * batch.scored).sum();
  }
  const auto gradients = torch::autograd::grad({output}, tables, {}, false, false, /*allow_unused=*/true);
  std::map<std::string, std::set<int64_t>> untrained;  // row kind -> values
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (!gradients[i].defined()) continue;
    const auto rows = torch::nonzero(rows_with_gradient(gradients[i]).logical_and(tables_[i].trained.logical_not()))
                          .flatten().cpu();
    for (int64_t k = 0; k < rows.numel(); ++k)
      untrained[tables_[i].row_kind].insert(rows[k].item<int64_t>() + tables_[i].first_row_value);
  }
  std::vector<std::string> parts;
  for (const auto& [kind, values] : untrained)
    parts.push_back(fmt::format("{}s {}", kind, value_ranges(std::vector<int64_t>(values.begin(), values.end()))));
  return parts.empty() ? "" : config_.encoding.name + ": " + join(parts, "; ") + " never trained";
}

Evaluator::ExtrapolationScope::ExtrapolationScope(Evaluator& evaluator, int64_t tokens, const std::string& method)
    : encoding_(evaluator.model_->encoding()) {
  // stretch rotary schemes by test length / training length (in tokens)
  const int64_t training_tokens = evaluator.task_.sequence_length(evaluator.config_.train.max_length);
  encoding_.set_extrapolation({method, double(tokens) / double(training_tokens), training_tokens});
}

Evaluator::ExtrapolationScope::~ExtrapolationScope() { encoding_.set_extrapolation({}); }

EvalResult Evaluator::evaluate_length(int64_t length, int64_t samples, const std::string& method, bool statistics,
                                      std::optional<double> condition) {
  torch::NoGradGuard no_grad;
  model_->eval();
  Rng rng(evaluation_data_seed(config_.seed, length));
  Rng position_rng(position_stream_seed(evaluation_data_seed(config_.seed, length)));
  std::optional<ExtrapolationScope> extrapolation(std::in_place, *this, task_.sequence_length(length), method);
  EvalResult r;
  r.method = method;
  r.length = length;
  if (condition) {
    r.condition = task_.evaluation_condition();
    r.condition_value = *condition;
  }
  r.step = step_;
  std::tie(r.sampler, r.positions_max_length) = evaluation_sampler(config_.positions);
  r.sequence_length = task_.sequence_length(length);
  const int64_t examples = task_.evaluation_size(length, samples);
  ChanceLevel chance(task_.num_classes(), task_.chance_per_position());
  PositionFreeLevel position_free;
  AttentionSummaryAccumulator attention;
  ForwardRequest request;
  request.attentions = statistics && config_.analysis.attention_statistics;
  double loss_sum = 0;
  int64_t correct = 0, scored = 0, correct_sequences = 0;
  for (int64_t done = 0; done < examples;) {
    if (stop_check_) stop_check_();  // a long evaluation stops within a batch of a signal, not a length
    const int64_t n = std::min(config_.eval.batch_size, examples - done);
    Batch batch = (condition ? task_.condition_batch(length, *condition, n, rng)
                             : task_.evaluation_batch(length, done, n, rng)).to(device_);
    auto positions = evaluation_positions(batch, position_rng);
    if (done == 0 && statistics) r.untrained = untrained_rows_used(batch, positions);
    const auto scope = autocast();
    const auto logits = request.attentions ? forward_with_statistics(batch, positions, attention)
                                           : model_->forward(batch.tokens, batch.padding, positions, batch.segments, request).logits;
    BatchScore s = score_batch(logits, batch);
    loss_sum += s.loss.item<double>() * s.scored_tokens;
    correct += s.correct_tokens;
    scored += s.scored_tokens;
    correct_sequences += s.correct_sequences;
    chance.add(batch);
    position_free.add(batch);
    done += n;
  }
  extrapolation.reset();
  model_->train();
  r.samples = examples;
  r.loss = loss_sum / std::max<int64_t>(1, scored);
  r.per_token_accuracy = static_cast<double>(correct) / std::max<int64_t>(1, scored);
  r.per_sequence_accuracy = static_cast<double>(correct_sequences) / std::max<int64_t>(1, examples);
  const ChanceScore c = chance.score();
  r.chance_token_accuracy = c.token_accuracy;
  r.chance_sequence_accuracy = c.sequence_accuracy;
  r.chance_loss = c.loss;
  const PositionFreeScore free = position_free.score();
  r.position_free_token_accuracy = free.token_accuracy;
  r.position_free_sequence_accuracy = free.sequence_accuracy;
  r.attention = attention.summary();
  return r;
}

namespace {

Positions slice_positions(const Positions& positions, int64_t start, int64_t end) {
  return Positions(positions.query.slice(0, start, end), positions.key.slice(0, start, end));
}

torch::Tensor slice_rows(const torch::Tensor& t, int64_t start, int64_t end) {
  return t.defined() ? t.slice(0, start, end) : t;
}

}  // namespace

torch::Tensor Evaluator::forward_with_statistics(const Batch& batch, const Positions& positions,
                                               AttentionSummaryAccumulator& attention) {
  ForwardRequest request;
  request.attentions = true;
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  const int64_t per_example = config_.model.num_layers * config_.model.num_heads * T * T;
  const int64_t slice = std::max<int64_t>(1, statistics_probabilities_ / per_example);
  if (slice >= B) {  // the usual case: one forward, as without statistics
    auto output = model_->forward(batch.tokens, batch.padding, positions, batch.segments, request);
    attention.add(output.attentions, batch.padding);
    return output.logits;
  }
  std::vector<torch::Tensor> logits;
  for (int64_t start = 0; start < B; start += slice) {
    const int64_t end = std::min(B, start + slice);
    const auto padding = slice_rows(batch.padding, start, end);
    auto output = model_->forward(slice_rows(batch.tokens, start, end), padding,
                                  slice_positions(positions, start, end), slice_rows(batch.segments, start, end), request);
    attention.add(output.attentions, padding);
    logits.push_back(output.logits);
  }
  return torch::cat(logits);
}

Positions Evaluator::evaluation_positions(const Batch& batch, Rng& position_rng) {
  if (batch.positions.defined()) return Positions(batch.positions, batch.positions);
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  if (config_.positions.evaluate_with == "sampler") return sampler_.sample_for_evaluation(B, T, position_rng, device_);
  return contiguous_positions(B, T, device_);
}

std::pair<Batch, Positions> Evaluator::evaluation_examples(int64_t length, int64_t count, uint64_t seed) {
  Rng rng(seed), position_rng(position_stream_seed(seed));
  count = std::max<int64_t>(1, task_.evaluation_size(length, count));
  Batch batch = task_.evaluation_batch(length, 0, count, rng).to(device_);
  return {batch, evaluation_positions(batch, position_rng)};
}

Evaluator::Inspection Evaluator::inspect(const torch::Tensor& tokens, const torch::Tensor& padding,
                                     const Positions& positions, const torch::Tensor& segments,
                                     const std::string& method, ForwardRequest request, bool score_terms) {
  torch::NoGradGuard no_grad;
  model_->eval();
  ExtrapolationScope extrapolation(*this, tokens.size(1), method);
  request.score_parts = request.score_parts || score_terms;
  const auto scope = autocast();
  Inspection result;
  result.output = model_->forward(tokens, padding, positions, segments, request);
  if (request.score_parts && model_->encoding().adds_to_residual()) {  // the same forward without position vectors
    ForwardRequest content_request;
    content_request.score_parts = true;
    content_request.position_embeddings = false;
    result.content = model_->forward(tokens, padding, positions, segments, content_request).score_parts;
  }
  model_->train();
  if (score_terms)
    for (size_t l = 0; l < result.output.score_parts.size(); ++l)
      result.score_terms.push_back(
          layer_score_terms(result.output.score_parts[l], result.content.empty() ? nullptr : &result.content[l]));
  return result;
}

AttentionMaps Evaluator::attention_maps(int64_t length, int64_t examples, const std::string& method) {
  auto [batch, positions] = evaluation_examples(length, examples, evaluation_data_seed(config_.seed, length));
  ForwardRequest request;
  request.attentions = true;
  request.score_parts = true;
  const Inspection inspection = inspect(batch.tokens, batch.padding, positions, batch.segments, method, request);
  AttentionMaps maps;
  std::vector<LocalAttention> local;  // model.window / model.chunk, in the blocks that attend locally
  for (int64_t l = 0; l < config_.model.num_layers; ++l)
    local.push_back(local_block(config_.model, l) ? LocalAttention{config_.model.window, config_.model.chunk}
                                                  : LocalAttention{});
  maps.terms = score_term_statistics(inspection.output.score_parts, inspection.content, batch.padding,
                                     config_.model.causal, local);
  maps.length = length;
  maps.method = method;
  maps.step = step_;
  std::tie(maps.sampler, maps.positions_max_length) = evaluation_sampler(config_.positions);
  maps.probs = torch::stack(inspection.output.attentions, 1).to(torch::kCPU, torch::kFloat32);  // (N, layers, H, T, T)
  maps.tokens = batch.tokens.cpu();
  maps.positions = positions.key.cpu();
  return maps;
}

std::vector<ProbeResult> Evaluator::probes(int64_t length, const std::string& method) {
  torch::NoGradGuard no_grad;
  model_->eval();
  ExtrapolationScope extrapolation(*this, task_.sequence_length(length), method);
  const uint64_t seed = evaluation_data_seed(config_.seed, length) ^ 0x9B0BEull;  // not the evaluation set
  auto [batch, positions] = evaluation_examples(length, config_.analysis.probe_examples, seed);
  ForwardRequest request;
  request.hidden_states = true;
  const auto scope = autocast();
  // in batches of eval.batch_size: each forward also makes the head's logits, (B, T, classes)
  std::vector<std::vector<torch::Tensor>> parts;  // per batch, per layer
  const int64_t N = batch.tokens.size(0);
  for (int64_t first = 0; first < N; first += config_.eval.batch_size) {
    const int64_t n = std::min(config_.eval.batch_size, N - first);
    const auto rows = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, first, n) : t; };
    const Positions part_positions(rows(positions.query), rows(positions.key));
    auto output = model_->forward(rows(batch.tokens), rows(batch.padding), part_positions, rows(batch.segments), request);
    for (auto& hidden : output.hidden_states) hidden = hidden.to(torch::kFloat32);  // the probes fit in float32
    parts.push_back(std::move(output.hidden_states));
  }
  std::vector<torch::Tensor> hidden_states;
  for (size_t l = 0; l < parts.front().size(); ++l) {
    std::vector<torch::Tensor> layer;
    for (const auto& part : parts) layer.push_back(part[l]);
    hidden_states.push_back(torch::cat(layer, 0));
  }
  model_->train();
  auto results = position_probes(hidden_states, batch.tokens, task_.vocab_size(), length,
                                 config_.analysis.probe_ridge, seed);
  for (auto& p : results) {
    p.method = method;
    p.step = step_;
    std::tie(p.sampler, p.positions_max_length) = evaluation_sampler(config_.positions);
  }
  return results;
}

std::vector<EvalResult> Evaluator::evaluate() {
  std::vector<EvalResult> results;
  for (const auto& method : config_.eval.extrapolation)
    for (int64_t length : config_.eval.lengths)
      for (const auto& value : condition_values()) {
        if (stop_check_) stop_check_();
        results.push_back(evaluate_length(length, config_.eval.samples, method, true, value));
      }
  return results;
}

std::vector<std::optional<double>> Evaluator::condition_values() const {
  const auto& values = pelab::condition_values(config_.eval, task_.evaluation_condition());
  if (values.empty()) return {std::nullopt};
  return std::vector<std::optional<double>>(values.begin(), values.end());
}

}  // namespace pelab
