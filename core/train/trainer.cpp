#include "core/train/trainer.h"

#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <filesystem>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <sstream>
#include <stdexcept>

#include "core/encodings/host_to_device.h"
#include "core/model/run_generator.h"
#include "core/io/hdf5_store.h"
#include "core/io/live_curve.h"
#include "core/train/adam.h"
#include "core/train/checkpoint.h"
#include "core/train/metrics.h"
#include "core/train/progress.h"
#include "core/train/schedule.h"
#include "core/train/stop_signal.h"

namespace pelab {

uint64_t training_data_seed(int64_t run_seed) { return 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(run_seed); }

namespace {

// A LibTorch generator's state (uint8), read and written under its lock; `generator` is a
// handle: the copy shares the default generator it came from.
torch::Tensor generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// A CUDA generator's state changes alone: no capture, draw or replay meanwhile (run_generator.h).
void set_generator_state(at::Generator generator, const torch::Tensor& state) {
  std::unique_lock<CudaGeneratorMutex> alone;
  if (generator.device().is_cuda()) alone = cuda_generator_exclusive();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

Trainer::Trainer(const RunConfig& config, Encoder model, const Task& task, torch::Device device)
    : config_(config),
      sampler_(config.positions),
      model_(std::move(model)),
      task_(task),
      device_(device),
      evaluator_(config, model_, task, device),
      optimizer_(model_->parameters(), config.train),
      data_rng_(training_data_seed(config.seed)),
      position_rng_(position_stream_seed(training_data_seed(config.seed))) {
  evaluator_.set_stop_check([this] { stop_if_requested(); });
  gradient_seen_ = torch::zeros({static_cast<int64_t>(model_->parameters().size())},
                                torch::TensorOptions(torch::kUInt8).device(device_));
  const std::string& graphs = config_.train.cuda_graphs;
  if (graphs == "on" && !(device_.is_cuda() && cuda_graphs_available()))
    throw std::runtime_error(fmt::format("train.cuda_graphs: on needs a CUDA device and a LibTorch with CUDA; this "
                                         "run is on {}{} (set train.cuda_graphs: auto or off)",
                                         device_.str(), cuda_graphs_available() ? "" : " and this LibTorch has none"));
  // auto leaves bf16 out: a bf16 relative_key run failed in cuBLAS under graphs (2026-11-25,
  // H100, LibTorch 2.11: CUBLAS_STATUS_EXECUTION_FAILED), not yet understood (docs/gpu.md)
  use_graphs_ = device_.is_cuda() && cuda_graphs_available() && config_.train.nonfinite != "skip" &&
                (graphs == "on" || (graphs == "auto" && config_.precision != "bf16"));
  if (use_graphs_) graph_stream_ = std::make_unique<SideStream>();
}

namespace {

torch::Tensor bytes_on_device(std::vector<uint8_t> bytes, torch::Device device) {
  // cloned: on the CPU, to() would return the view of `bytes`, which dies here
  return torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8).clone().to(device);
}

}  // namespace

void Trainer::record_gradients(int64_t step, const std::vector<torch::Tensor>& parameters) {
  evaluator_.mark_trained_rows();
  if (step >= config_.train.unused_parameters_steps) return;
  ++progress_.gradient_steps;
  for (size_t i = 0; i < parameters.size(); ++i)
    if (parameters[i].grad().defined()) {  // kGradientZero at least; kGradientNonzero once one is nonzero
      auto seen = gradient_seen_[i];  // a view
      seen.copy_(torch::maximum(seen, parameters[i].grad().ne(0).any().to(torch::kUInt8) + kGradientZero));
    }
}

void Trainer::check_unused_parameters(std::ostream& log) {
  if (progress_.gradient_steps == 0) return;  // every step skipped (train.nonfinite: skip): nothing to judge
  // Unreachable: no backward reached it (LibTorch left its gradient undefined), so no step can
  // train it: the config or the scheme is wrong. Zero so far: reached, but the gradient was
  // exactly zero each time (a sparse parameter, e.g. FIRE's threshold under randomized
  // positions): a warning and a record in the run file, never the end of the run.
  std::vector<std::string> unreachable, zero;
  const auto seen = flags_on_host(gradient_seen_);  // one read-back
  size_t i = 0;
  for (const auto& p : model_->named_parameters()) {
    const uint8_t record = seen[i++];
    if (record == kGradientNone) unreachable.push_back(p.key());
    if (record == kGradientZero) zero.push_back(p.key());
  }
  if (!zero.empty()) {
    progress_.curve.zero_gradient_parameters = zero;
    log << fmt::format("warning: parameter(s) reached by the forward pass whose gradient was exactly zero at each of "
                       "the first {} steps: {} (recorded in the run file; training goes on)\n",
                       progress_.gradient_steps, join(zero));
  }
  if (unreachable.empty()) return;
  const std::string what = fmt::format(
      "parameter(s) no backward pass reached in the first {} steps: {}. Every parameter a scheme or the model owns "
      "must be trained by the forward pass",
      progress_.gradient_steps, join(unreachable));
  if (config_.train.unused_parameters == "error")
    throw std::runtime_error(what + " (train.unused_parameters: warn goes on regardless)");
  log << "warning: " << what << "\n";
}

std::vector<std::string> Trainer::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& p : model_->named_parameters()) names.push_back(p.key());
  return names;
}

Evaluator& Trainer::evaluator() {
  evaluator_.set_step(progress_.step);
  return evaluator_;
}

void Trainer::evaluate_curve_point() {
  evaluator_.set_stop_check({});  // a stop signal is handled after the step's checkpoint, not in here
  const auto& lengths = config_.eval.every_lengths.empty() ? config_.eval.lengths : config_.eval.every_lengths;
  for (int64_t length : lengths)
    progress_.evaluation_curve.push_back(evaluator().evaluate_length(length, config_.eval.every_samples, "none", false));
  evaluator_.set_stop_check([this] { stop_if_requested(); });
}

std::string Trainer::nonfinite_gradients() const {
  const std::string names = nonfinite_tensors(/*gradients=*/true);
  return names.empty() ? std::string("(none)") : names;
}

// The parameters (or their gradients) that hold a NaN or an infinity, the first five; empty:
// none.
std::string Trainer::nonfinite_tensors(bool gradients) const {
  std::vector<std::string> names;
  for (const auto& p : model_->named_parameters()) {
    const torch::Tensor& x = gradients ? p.value().grad() : p.value();
    if (x.defined() && !torch::isfinite(x).all().item<bool>()) names.push_back(p.key());
  }
  if (names.size() > 5) names.resize(5), names.push_back("...");
  return join(names);
}

TrainingCurve Trainer::train(std::ostream& log, bool interactive) {
  return train_until(config_.train.steps, log, interactive);
}

int64_t Trainer::sync_every() const {
  if (config_.train.nonfinite == "skip") return 1;  // each step's update depends on its loss
  if (config_.train.sync_every > 0) return config_.train.sync_every;
  return device_.is_cuda() ? 16 : 1;  // on the CPU reading a value back costs nothing
}

namespace {

// What a captured step bakes in beyond its input tensors' values (cuda_graph_step.h): the
// shapes, whether any token is padding, and what the host knows of the positions.
std::string graph_key(const Batch& batch, const torch::Tensor& padding, const Positions& positions) {
  const PositionFacts* facts = positions.known_facts();
  return fmt::format("{}x{} padded {} segments {} positions {} {} {} {}", batch.tokens.size(0), batch.tokens.size(1),
                     padding.defined(), batch.segments.defined(), positions.query.stride(0) == 0,
                     positions.query.is_same(positions.key), facts ? (facts->contiguous ? "contiguous" : "known") : "-",
                     facts ? facts->offset_bound : -1);
}

// A step that cannot be a graph, found while running it eagerly (no gradient for a parameter).
struct NotCapturable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

BatchScore Trainer::forward_and_score(const Batch& batch, const torch::Tensor& padding, const Positions& positions,
                                      bool read_counts) {
  const auto scope = autocast();
  return score_batch(model_->forward(batch.tokens, padding, positions, batch.segments).logits, batch, read_counts);
}

torch::Tensor Trainer::clip_or_measure(const std::vector<torch::Tensor>& parameters) const {
  const double clip = config_.train.grad_clip;
  return clip > 0 ? clip_gradients(parameters, clip) : gradient_norm(parameters);
}

bool Trainer::graph_step(StepRecord& record, const Batch& batch, const torch::Tensor& padding,
                         const Positions& positions, const std::vector<torch::Tensor>& parameters, std::ostream& log) {
  if (!optimizer_.uniform_steps()) return false;  // a graph updates every parameter
  const std::string key = graph_key(batch, padding, positions);
  GraphEntry& entry = graphs_[key];
  if (entry.eager) return false;
  model_->encoding().validate_positions(positions);  // a replay runs none of the forward pass's host code
  // inputs: tokens, padding, targets, scored, segments, query and key positions, Adam's numbers
  const std::vector<torch::Tensor> inputs = {
      batch.tokens,    padding, batch.targets, batch.scored, batch.segments,
      positions.query, positions.key, host_to_device(optimizer_.next_step_scalars(record.learning_rate), device_)};
  const PositionFacts* facts = positions.known_facts();
  const PositionFacts step_facts = facts ? *facts : PositionFacts{};
  auto body = [&, step_facts](const std::vector<torch::Tensor>& in) {
    Batch b;
    b.tokens = in[0], b.padding = in[1], b.targets = in[2], b.scored = in[3], b.segments = in[4];
    Positions p{in[5], in[6]};
    if (step_facts.query.defined()) {  // the same facts, of the tensors the body is given
      p.facts = step_facts;
      p.facts.query = in[5], p.facts.key = in[6];
    }
    BatchScore score = forward_and_score(b, b.padding, p, /*read_counts=*/false);
    score.loss.backward();
    std::vector<torch::Tensor> out = {score.loss.detach(), score.counts, clip_or_measure(parameters)};
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!parameters[i].grad().defined())
        throw NotCapturable(fmt::format("parameter {} has no gradient", parameter_names()[i]));
      out.push_back(parameters[i].grad());
    }
    optimizer_.step_with(in[7]);
    return out;
  };
  std::vector<torch::Tensor> outputs;
  optimizer_.clear_gradients();
  if (!entry.probed) {  // this key's first step: eagerly, with every read back from the device an error
    // a failed try must not have drawn dropout masks: the eager step draws the same ones
    const auto rng = generator_state(at::globalContext().defaultGenerator(device_));
    try {
      SyncCheck no_reads;
      auto drawing = cuda_generator_shared();  // its dropout draws, eagerly (run_generator.h)
      outputs = body(inputs);
    } catch (const std::exception& e) {
      if (!SyncCheck::is_sync_error(e) && !dynamic_cast<const NotCapturable*>(&e)) throw;
      entry.eager = true;
      log << fmt::format("steps of shape {} run without a CUDA graph: {}\n", key,
                         dynamic_cast<const NotCapturable*>(&e) ? e.what() : "they read values back from the GPU");
      optimizer_.clear_gradients();
      set_generator_state(at::globalContext().defaultGenerator(device_), rng);
      return false;
    }
    entry.probed = true;
  } else {
    if (!entry.graph) {
      const auto rng = generator_state(at::globalContext().defaultGenerator(device_));
      try {
        entry.graph = std::make_unique<CudaGraphStep>(inputs, body, graph_pool_owner_);
      } catch (const std::exception& e) {
        // a packed process (SyncCheck off, core/train/cuda_graph_step.h): a step that reads
        // back is found here, when its thread-local capture fails; elsewhere a failure is one
        if (SyncCheck::active_in_process()) throw;
        entry.eager = true;
        log << fmt::format("steps of shape {} run without a CUDA graph: their capture failed ({})\n", key,
                           std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
        optimizer_.clear_gradients();
        set_generator_state(at::globalContext().defaultGenerator(device_), rng);
        return false;
      }
      if (!graph_pool_owner_) graph_pool_owner_ = entry.graph.get();
    }
    outputs = entry.graph->replay(inputs);
    ++graph_replays_;
    // the step's values outlive the next replay; its gradients are the graph's
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].mutable_grad() = outputs[3 + i];
    for (size_t i = 0; i < 3; ++i) outputs[i] = outputs[i].clone();
  }
  optimizer_.advance_steps();
  record_gradients(record.step, parameters);
  record.device_loss = outputs[0];
  record.device_counts = outputs[1];
  record.device_gradient_norm = outputs[2];
  return true;
}

// The host's part of a step once its numbers are read back: the log window's sums, the
// progress line and the curve row.
void Trainer::account(const StepRecord& r, ProgressReporter& progress) {
  TrainerProgress& p = progress_;
  if (!r.skipped) {
    p.window_loss += r.loss;
    p.window_accuracy += static_cast<double>(r.correct_tokens) / std::max<int64_t>(1, r.scored_tokens);
    p.window_tokens += static_cast<double>(r.tokens);
    p.total_tokens += static_cast<double>(r.tokens);
    p.window_seconds += r.seconds;
    ++p.window_steps;
  }
  const int64_t done = r.step + 1, n = std::max<int64_t>(1, p.window_steps);
  ProgressStats stats{done, p.window_loss / n, p.window_accuracy / n,
                      p.window_tokens / std::max(1e-9, p.window_seconds), r.learning_rate, ""};
  if (!config_.train.phases.empty()) {
    const auto& phases = config_.train.phases;
    const int64_t index = phase_at(config_.train, r.step).index;
    stats.phase = fmt::format("phase {}/{} (lengths {}-{})", index + 1, phases.size(), phases[index].min_length,
                              phases[index].max_length);
  }
  if (p.window_steps > 0) progress.update(stats);
  if ((done % config_.train.log_every == 0 || done == config_.train.steps) && p.window_steps > 0) {
    TrainingCurve& curve = p.curve;
    curve.step.push_back(stats.step);
    curve.loss.push_back(stats.loss);
    curve.accuracy.push_back(stats.accuracy);
    curve.learning_rate.push_back(r.learning_rate);
    curve.tokens_per_second.push_back(stats.tokens_per_second);
    curve.phase.push_back(phase_at(config_.train, r.step).index);
    p.window_loss = p.window_accuracy = p.window_tokens = p.window_seconds = 0;
    p.window_steps = 0;
  }
}

// Reads back the steps run since the last read (one transfer), checks them in order and
// accounts for them; a non-finite loss or gradient fails the run, naming its step.
void Trainer::settle_pending(ProgressReporter& progress) {
  if (pending_.empty()) return;
  std::vector<torch::Tensor> values;
  for (const auto& r : pending_)
    values.push_back(torch::cat({r.device_loss.to(torch::kFloat64).reshape({1}), r.device_gradient_norm.reshape({1}),
                                 r.device_counts.to(torch::kFloat64)}));
  const auto host = torch::stack(values).cpu();  // (steps, 5): loss, norm, correct, scored, sequences
  const auto end = std::chrono::steady_clock::now();
  auto v = host.accessor<double, 2>();
  for (size_t i = 0; i < pending_.size(); ++i) {
    StepRecord& r = pending_[i];
    r.loss = v[i][0];
    r.gradient_norm = v[i][1];
    r.correct_tokens = static_cast<int64_t>(v[i][2]);
    r.scored_tokens = static_cast<int64_t>(v[i][3]);
    // the device ran ahead: a step's time is from its start to the next one's (the last: to now)
    r.seconds = std::chrono::duration<double>((i + 1 < pending_.size() ? pending_[i + 1].start : end) - r.start).count();
    if (!std::isfinite(r.loss) || !std::isfinite(r.gradient_norm)) {
      const int64_t seen = pending_.back().step + 1;
      pending_.clear();
      throw std::runtime_error(fmt::format(
          "non-finite {} at step {} (length {}): loss = {}, gradient norm = {}; lower train.learning_rate{}, or set "
          "train.nonfinite: skip (found at step {}: the loss is read back every {} steps, train.sync_every; with 1 "
          "the run stops at the step itself and names the parameters)",
          std::isfinite(r.loss) ? "gradient" : "loss", r.step + 1, r.length, r.loss, r.gradient_norm,
          config_.train.grad_clip > 0 ? "" : ", enable train.grad_clip", seen, sync_every()));
    }
    account(r, progress);
  }
  pending_.clear();
}

TrainingCurve Trainer::train_until(int64_t until, std::ostream& log, bool interactive) {
  const TrainConfig& t = config_.train;
  until = std::min(until, t.steps);
  model_->train();
  TrainerProgress& p = progress_;
  TrainingCurve& curve = p.curve;
  ProgressReporter progress(log, t.steps, t.log_every, interactive);
  const auto start = std::chrono::steady_clock::now();
  const double seconds_before = p.training_seconds;
  auto update_seconds = [&] {
    p.training_seconds = seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int64_t read_every = sync_every();
  const auto parameters = model_->parameters();
  std::optional<SideStream::Scope> on_graph_stream;
  if (graph_stream_) on_graph_stream.emplace(*graph_stream_);

  while (p.step < until) {
    const int64_t step = p.step;
    StepRecord record;
    record.step = step;
    record.start = std::chrono::steady_clock::now();
    record.length = curriculum_length(t, step, data_rng_);
    Batch batch = task_.sample(t.batch_size, record.length, data_rng_);
    const bool padded = batch.padding.any().item<bool>();  // on the host: the model need not ask the device
    auto positions = training_positions(batch);  // from the host batch: nothing read back
    batch = batch.to(device_);
    const torch::Tensor padding = padded ? batch.padding : torch::Tensor();
    record.tokens = batch.tokens.numel();
    record.learning_rate = learning_rate_at(t, step);
    optimizer_.clear_gradients();
    if (use_graphs_ && graph_step(record, batch, padding, positions, parameters, log)) {
      pending_.push_back(std::move(record));
    } else {
      std::shared_lock<CudaGeneratorMutex> drawing;  // dropout on a GPU, eagerly (run_generator.h)
      if (device_.is_cuda()) drawing = cuda_generator_shared();
      BatchScore score = forward_and_score(batch, padding, positions, /*read_counts=*/read_every == 1);
      if (read_every > 1) {
        // nothing read back: the step runs whole (a non-finite one too) and is checked when read
        score.loss.backward();
        record.device_gradient_norm = clip_or_measure(parameters);
        record_gradients(step, parameters);
        optimizer_.step(record.learning_rate);
        record.device_loss = score.loss.detach();
        record.device_counts = score.counts;
        pending_.push_back(std::move(record));
      } else {
        record.loss = score.loss.item<double>();
        record.correct_tokens = score.correct_tokens;
        record.scored_tokens = score.scored_tokens;
        if (std::isfinite(record.loss)) {
          score.loss.backward();
          record.gradient_norm = clip_or_measure(parameters).item<double>();
        }
        const double loss = record.loss, gradient_norm = record.gradient_norm;
        if (!std::isfinite(loss) || !std::isfinite(gradient_norm)) {
          const std::string what = fmt::format(
              "non-finite {} at step {} (length {}): loss = {}, gradient norm = {}{}", std::isfinite(loss) ? "gradient" : "loss",
              step + 1, record.length, loss, std::isfinite(loss) ? fmt::format("{}", gradient_norm) : "not computed",
              std::isfinite(loss) ? "; not finite in: " + nonfinite_gradients() : "");
          // the parameters themselves non-finite (an update went wrong): no later step can recover
          const std::string broken = std::isfinite(loss) ? std::string() : nonfinite_tensors(/*gradients=*/false);
          if (!broken.empty())
            throw std::runtime_error(fmt::format(
                "{}; the parameters are not finite ({}) {}, which no skipped step can undo{}", what, broken,
                step == 0 ? std::string("before training") : fmt::format("since the update of step {}", step),
                step == 0 ? "" : t.eps == 0 ? "; lower train.learning_rate or raise train.eps" : "; lower train.learning_rate"));
          if (t.nonfinite != "skip")
            throw std::runtime_error(what + "; lower train.learning_rate" +
                                     (t.grad_clip > 0 ? "" : ", enable train.grad_clip") +
                                     ", or set train.nonfinite: skip");
          if (curve.skipped_steps++ < 3) log << "skipped " << what << "\n";
          optimizer_.clear_gradients();
          record.skipped = true;
        } else {
          record_gradients(step, parameters);
          optimizer_.step(record.learning_rate);
          record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - record.start).count();
        }
        account(record, progress);
      }
    }
    ++p.step;
    const bool log_row = p.step % t.log_every == 0 || p.step == t.steps || p.step == until;
    const bool unused_check = p.step == std::min(t.unused_parameters_steps, t.steps);
    const bool curve_point = config_.eval.every > 0 && (p.step % config_.eval.every == 0 || p.step == t.steps);
    const bool keep = std::find(config_.output.keep_checkpoints.begin(), config_.output.keep_checkpoints.end(),
                                p.step) != config_.output.keep_checkpoints.end();
    const bool stopping = stop_signal() != 0;
    const bool checkpoint = !checkpoint_path_.empty() &&
                            (stopping || p.step == t.steps || (checkpoint_every_ > 0 && p.step % checkpoint_every_ == 0));
    if (static_cast<int64_t>(pending_.size()) >= read_every || log_row || unused_check || curve_point || checkpoint ||
        stopping)
      settle_pending(progress);
    if (unused_check) check_unused_parameters(log);
    if (curve_point) evaluate_curve_point();
    if ((log_row || curve_point) && !checkpoint_path_.empty()) write_live_curve_file(log);
    if (keep) p.snapshots.emplace_back(p.step, checkpoint_of(*model_));
    if (checkpoint) {
      update_seconds();
      write_checkpoint();
    }
    if (stopping) {
      progress.finish();
      stop_if_requested();
    }
  }
  settle_pending(progress);
  progress.finish();
  update_seconds();
  if (use_graphs_) {
    int64_t captured = 0, eager = 0;
    for (const auto& [key, entry] : graphs_) captured += entry.graph != nullptr, eager += entry.eager;
    log << fmt::format("cuda graphs: {} step shapes captured, {} run eagerly; {} steps replayed\n", captured, eager,
                       graph_replays_);
  }
  if (p.step == t.steps && curve.skipped_steps > 0)
    log << fmt::format("skipped {} of {} steps with a non-finite loss or gradient (train.nonfinite: skip)\n",
                       curve.skipped_steps, t.steps);
  return curve;
}

void Trainer::enable_checkpoints(std::string path, int64_t every) {
  checkpoint_path_ = std::move(path);
  checkpoint_every_ = every;
}

TrainingCheckpoint Trainer::checkpoint() const {
  TrainingCheckpoint c;
  c.config_yaml = to_yaml(config_);
  c.threads = torch::get_num_threads();
  c.progress = progress_;
  c.trained_rows = evaluator_.trained_rows();
  c.gradient_seen = flags_on_host(gradient_seen_);
  std::ostringstream data, positions;
  data << data_rng_;
  positions << position_rng_;
  c.data_rng = data.str();
  c.position_rng = positions.str();
  c.torch_rng = generator_state(run_cpu_generator());
  if (device_.is_cuda()) c.cuda_rng = generator_state(at::globalContext().defaultGenerator(device_));
  c.model = checkpoint_of(*model_);
  c.optimizer = optimizer_.state(parameter_names());
  return c;
}

void Trainer::restore(const TrainingCheckpoint& c) {
  load_named_tensors(*model_, c.model, "training checkpoint");
  optimizer_.load_state(c.optimizer, parameter_names());
  std::istringstream data(c.data_rng), positions(c.position_rng);
  data >> data_rng_;
  positions >> position_rng_;
  if (!data || !positions) throw std::runtime_error("the checkpoint's RNG states cannot be read");
  set_generator_state(run_cpu_generator(), c.torch_rng);
  // a checkpoint from the CPU has no GPU state (and one from a GPU resumed on the CPU needs none)
  if (device_.is_cuda() && c.cuda_rng.defined())
    set_generator_state(at::globalContext().defaultGenerator(device_), c.cuda_rng);
  progress_ = c.progress;
  evaluator_.set_trained_rows(c.trained_rows);
  if (static_cast<int64_t>(c.gradient_seen.size()) != gradient_seen_.numel())
    throw std::runtime_error("the checkpoint's gradient record does not match the model's parameters");
  gradient_seen_ = bytes_on_device(c.gradient_seen, device_);
}

void Trainer::write_live_curve_file(std::ostream& log) {
  LiveCurve run;
  run.run_name = config_.name;
  run.config_yaml = to_yaml(config_);
  run.train_min_length = config_.train.min_length;
  run.train_max_length = config_.train.max_length;
  run.steps = config_.train.steps;
  std::tie(run.run_sampler, run.run_positions_max_length) = evaluation_sampler(config_.positions);
  const std::string folder = std::filesystem::path(checkpoint_path_).parent_path().string();
  try {
    write_live_curve((folder.empty() ? std::string(".") : folder) + "/" + kLiveCurveFileName, run, progress_.curve,
                     progress_.evaluation_curve);
  } catch (const std::exception& e) {  // the run goes on; its checkpoints and run file say what is lost
    if (!live_curve_warned_) log << "warning: " << e.what() << "; training goes on\n";
    live_curve_warned_ = true;
  }
}

void Trainer::write_checkpoint() const { write_training_checkpoint(checkpoint_path_, checkpoint()); }

void Trainer::stop_if_requested() const {
  if (stop_signal() != 0) throw RunInterrupted(stop_signal(), progress_.step, checkpoint_path_);
}

Positions Trainer::training_positions(const Batch& host_batch) {
  if (!host_batch.positions.defined())
    return sampler_.sample(host_batch.tokens.size(0), host_batch.tokens.size(1), position_rng_, device_);
  auto given = host_batch.positions;
  if (config_.positions.sampler == "random_offset") {
    const int64_t largest = given.max().item<int64_t>();  // on the host; check_lengths_fit: below L_max
    std::uniform_int_distribution<int64_t> offset(0, std::max<int64_t>(0, config_.positions.max_length - 1 - largest));
    given = given + offset(position_rng_);
  }
  const auto on_device = host_to_device(given, device_);
  return Positions(on_device, on_device);
}

}  // namespace pelab
