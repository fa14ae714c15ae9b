#include "core/run/run.h"

#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <thread>
#include <tuple>

#include "core/config/yaml_reader.h"
#include "core/encodings/position_sampler.h"
#include "core/encodings/registry.h"
#include "core/io/hdf5_store.h"
#include "core/io/live_curve.h"
#include "core/io/schema.h"
#include "core/kernels/instruction_sets.h"
#include "core/model/run_generator.h"
#include "core/train/checkpoint.h"
#include "data/task_registry.h"

namespace pelab {

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name == "auto") {
    if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, 0);
    if (name == "cuda")
      throw std::runtime_error("device: cuda was requested but this LibTorch has no CUDA device available; "
                               "use device: cpu or auto");
    return torch::kCPU;
  }
  throw std::invalid_argument("unknown device '" + name + "'; expected cpu, cuda or auto");
}

void set_threads(int64_t requested) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(requested > 0 ? requested : cores));
}

void configure_cpu_math() {
  // PELAB_CPU_KERNELS's errors here, not at the first kernel call (inside a parallel region)
  kernels::instruction_set();
  // Softmax over strongly negative biases (ALiBi at long lengths: -m |i - j| in the
  // hundreds) produces denormal floats, which x86 handles up to 100x slower: flush them
  // to zero, as a GPU does (docs/performance.md).
  at::globalContext().setFlushDenormal(true);
#ifdef __GLIBC__
  // Training allocates and frees the same large tensors every step (attention scores of
  // 64 MB at d_model 256, batch 8, T 512). glibc serves blocks above its mmap threshold (at
  // most 32 MB) with fresh mmap()ed pages that the kernel must fault in and zero on every
  // step: keep such blocks in the heap for reuse instead, at the cost of a higher peak
  // resident memory (docs/performance.md).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

Encoder build_model(const RunConfig& config, const Task& task) {
  Encoder model{nullptr};
  // under one lock: several runs may be built at once in one process (the packed runner)
  initialize_with_seed(config.seed, [&] {
    model = Encoder(config.model, config.encoding, task.vocab_size(), task.num_classes(), config.encoding_mix,
                    config.encoding_heads);
  });
  return model;
}

void check_lengths_fit(const RunConfig& config, const Task& task, EncoderImpl& model) {
  // Fail before training, not after it: every training and test length must be encodable,
  // and an evaluation condition set only for a task that has it.
  for (const auto& condition : evaluation_conditions())
    if (!(config.eval.*condition.values).empty() && task.evaluation_condition() != condition.name)
      throw std::runtime_error(fmt::format("{} is set, but task {} has no {} condition (eval.depths: passkey; "
                                           "eval.p_ignore: flip_flop)", condition.key, config.task.name,
                                           condition.name));
  std::vector<int64_t> lengths = config.eval.lengths;
  if (config.eval.every > 0)
    for (int64_t L : config.eval.every_lengths) lengths.push_back(L);
  for (int64_t L : config.analysis.attention_lengths) lengths.push_back(L);
  for (int64_t L : config.analysis.probe_lengths) lengths.push_back(L);
  lengths.push_back(config.train.max_length);  // last: checked as a training length
  const PositionSampler sampler(config.positions);
  std::vector<std::string> problems;  // one per length that does not fit: all named at once
  std::set<int64_t> checked;
  // one length (the last: the training length); throws std::runtime_error naming what does not fit
  auto check = [&](size_t i) {
    const int64_t length = lengths[i];
    try {
      task.check_length(length, /*training=*/i + 1 == lengths.size());
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    const int64_t T = task.sequence_length(length);
    // training draws from the sampler; evaluation too, unless positions.evaluate_with is
    // contiguous (or the sampler augments training only: cape)
    const bool training = i + 1 == lengths.size();
    const bool sampled = training || (config.positions.evaluate_with == "sampler" && !sampler.training_only());
    // task-given positions (positions: abacus or coupling): as given, offset by random_offset in training
    const auto* seq2seq = dynamic_cast<const Seq2SeqTask*>(&task);
    const auto given = seq2seq ? seq2seq->given_positions(seq2seq->input_length(length), seq2seq->output_length(length))
                               : std::pair<std::vector<int64_t>, std::vector<int64_t>>{};
    const bool distinct_integers = config.positions.sampler == "random_offset" || config.positions.sampler == "randomized";
    if (sampled && distinct_integers && given.first.empty() && T > config.positions.max_length)
      throw std::runtime_error("length " + std::to_string(length) + " (" + std::to_string(T) +
                               " tokens) does not fit positions.max_length = " +
                               std::to_string(config.positions.max_length) + " of the " + config.positions.sampler +
                               " sampler; raise positions.max_length");
    // the largest position training or evaluation can use at this length
    int64_t range = sampled ? sampler.position_range(T) : T;
    if (!given.first.empty()) {
      const auto& sampler_name = config.positions.sampler;
      if (sampler_name != "contiguous" && sampler_name != "random_offset")
        throw std::runtime_error("the task gives its own positions (" + config.task.name +
                                 " positions: abacus or coupling); positions.sampler " + sampler_name +
                                 " cannot draw them: use contiguous (as given) or random_offset (offset in training)");
      int64_t largest = 0;
      for (const auto* part : {&given.first, &given.second})
        for (int64_t p : *part) largest = std::max(largest, p);
      range = training && sampler_name == "random_offset" ? std::max(config.positions.max_length, largest + 1)
                                                          : largest + 1;
    }
    const bool real = sampled && sampler.continuous() && given.first.empty();
    Positions reached = contiguous_positions(1, given.first.empty() ? std::max(T, range) : range);
    if (real) reached = Positions(reached.query.to(torch::kFloat64), reached.key.to(torch::kFloat64));
    try {
      model.encoding().validate_positions(reached);
    } catch (const c10::Error& e) {
      throw std::runtime_error("length " + std::to_string(length) + " (" + std::to_string(T) + " tokens" +
                               (range > T ? ", positions up to " + std::to_string(range - 1) : std::string()) +
                               ") cannot be encoded" +
                               (real ? " with positions.sampler " + config.positions.sampler : std::string()) + ": " +
                               e.what_without_backtrace());
    }
  };
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i + 1 < lengths.size() && !checked.insert(lengths[i]).second) continue;  // a test length listed twice
    try {
      check(i);
    } catch (const std::runtime_error& e) {
      if (std::find(problems.begin(), problems.end(), e.what()) == problems.end()) problems.push_back(e.what());
    }
  }
  if (problems.size() == 1) throw LengthsDoNotFit(problems.front());
  if (problems.size() > 1)
    throw LengthsDoNotFit(std::to_string(problems.size()) + " lengths do not fit: " + join(problems, "; "));
  for (const auto& method : config.eval.extrapolation) {
    if (method != "none" && !model.encoding().supports_extrapolation())
      throw LengthsDoNotFit("extrapolation method '" + method + "' (eval.extrapolation, pelab eval "
                               "--extrapolation) needs a scheme that has one (the rotary methods: rope, xpos; clamp: "
                               "t5_bias); '" + config.encoding.name + "' has none");
    // a method only some rotary schemes have (rerope: rope), with every scheme of the model
    if (method == "none") continue;
    try {
      model.encoding().set_extrapolation({method, 2.0, task.sequence_length(config.train.max_length)});
      model.encoding().set_extrapolation({});
    } catch (const c10::Error& e) {
      model.encoding().set_extrapolation({});
      throw LengthsDoNotFit("extrapolation method '" + method + "' (eval.extrapolation, pelab eval --extrapolation): " +
                            e.what_without_backtrace());
    }
  }
}

void check_output_writable(const std::string& dir) {
  // Fail before training, not after it: a run that cannot write its file is lost work.
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw std::runtime_error("output.dir '" + dir + "' cannot be created: " + error.message());
  const std::string probe = (fs::path(dir) / ".pelab-write-test").string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const char text[] = "pelab";
  const bool written = fd >= 0 && ::write(fd, text, sizeof text) == static_cast<ssize_t>(sizeof text);
  const int cause = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  if (!written) throw std::runtime_error("output.dir '" + dir + "' is not writable: " + std::strerror(cause));
}

std::vector<int64_t> attention_map_lengths(const RunConfig& config, const Task& task) {
  if (config.analysis.attention_examples == 0) return {};
  if (!config.analysis.attention_lengths.empty()) return config.analysis.attention_lengths;
  std::vector<int64_t> lengths;
  const int64_t longest = *std::max_element(config.eval.lengths.begin(), config.eval.lengths.end());
  for (int64_t L : {config.train.max_length, longest})
    if (task.sequence_length(L) <= kDefaultAttentionMapTokens &&
        std::find(lengths.begin(), lengths.end(), L) == lengths.end())
      lengths.push_back(L);
  return lengths;
}

PreparedRun prepare_run(const RunConfig& config) {
  set_threads(config.threads);
  configure_cpu_math();
  PreparedRun run{resolve_device(config.device), make_task(config.task.name, config.task.options, config.task.format, config.task.bos),
                  nullptr};
  run.model = build_model(config, *run.task);
  run.model->to(run.device);
  return run;
}

RunConfig stored_run_config(const std::string& file, const std::string& stored_yaml) {
  return parse_run_config(stored_yaml, file + ":/config", {}, scheme_catalog(), task_catalog());
}

std::vector<std::string> differences_from_stored(const std::string& file, const std::string& stored_yaml,
                                                 const RunConfig& config) {
  std::string stored = stored_yaml;
  try {  // keys added since the file was written take their defaults
    stored = to_yaml(stored_run_config(file, stored_yaml));
  } catch (const ConfigError&) {
    // a key this build no longer knows: compare as written
  }
  return config_differences(stored, to_yaml(config));
}

namespace {

void check_same_config(const std::string& file, const std::string& stored_yaml, const RunConfig& config) {
  const auto differences = differences_from_stored(file, stored_yaml, config);
  if (!differences.empty())
    throw std::runtime_error(file + " was written by a different config (" + join(differences, "; ") +
                             "); resume with the same config, or remove it to start over");
}

}  // namespace

RunOutcome execute_run(const RunConfig& config, std::ostream& log, bool interactive, bool resume) {
  namespace fs = std::filesystem;
  const std::string run_file = config.output.dir + "/" + schema::kRunFileName;
  const std::string checkpoint_file = config.output.dir + "/" + kCheckpointFileName;
  if (resume && is_complete_run_file(run_file)) {
    RunRecord done = read_run_file(run_file, /*with_checkpoint=*/false);
    check_same_config(run_file, done.config_yaml, config);
    std::error_code ignored;  // a kill between the run file's rename and the checkpoint's removal
    fs::remove(checkpoint_file, ignored);
    fs::remove(config.output.dir + "/" + kLiveCurveFileName, ignored);
    log << "run '" << config.name << "' is already complete: " << run_file << "\n";
    return RunOutcome{run_file, done.training, done.evaluation, 0};
  }
  // the run's own CPU random stream: the same whether it trains alone or beside other runs
  // in this process (core/model/run_generator.h)
  RunGeneratorScope run_generator;
  PreparedRun prepared = prepare_run(config);
  const torch::Device device = prepared.device;
  auto& task = prepared.task;
  Encoder model = prepared.model;
  const auto counts = count_parameters(*model);

  const char* visible_gpus = std::getenv("CUDA_VISIBLE_DEVICES");  // set per run by pelab sweep --gpus
  log << fmt::format("pelab run '{}': task {} ({} format), encoding {}, {} positions, {} layers x d_model {} ({} parameters), "
                     "{} on {}{} with {} threads\n",
                     config.name, config.task.name, format_name(task->format()), config.encoding.name,
                     config.positions.sampler,
                     config.model.num_layers,
                     config.model.d_model, counts.at(schema::kTotal),
                     config.model.causal ? "causal" : "bidirectional", device.str(),
                     visible_gpus ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible_gpus) : std::string(),
                     torch::get_num_threads());
  check_lengths_fit(config, *task, *model);
  check_output_writable(config.output.dir);
  Trainer trainer(config, model, *task, device);
  trainer.enable_checkpoints(checkpoint_file, config.train.checkpoint_every);
  if (fs::exists(checkpoint_file) && resume) {
    const TrainingCheckpoint checkpoint = read_training_checkpoint(checkpoint_file);
    check_same_config(checkpoint_file, checkpoint.config_yaml, config);
    trainer.restore(checkpoint);
    log << fmt::format("resuming from step {} of {} ({})\n", checkpoint.progress.step, config.train.steps,
                       checkpoint_file);
    if (checkpoint.threads != torch::get_num_threads())
      log << fmt::format("warning: the checkpoint was written with {} threads, this run has {}: the results "
                         "may differ from an uninterrupted run in the last bits\n",
                         checkpoint.threads, torch::get_num_threads());
  } else if (fs::exists(checkpoint_file)) {
    log << "note: starting over; " << checkpoint_file << " is replaced (pass --resume to continue from it)\n";
  } else if (resume) {
    log << "no checkpoint in " << config.output.dir << ": starting at step 0\n";
  }
  RunOutcome outcome;
  outcome.training = trainer.train(log, interactive);
  outcome.tokens_per_second = trainer.tokens_per_second();
  log << fmt::format("trained {} steps in {:.1f}s ({:.0f} tokens/s); evaluating {} lengths x {} samples{}\n",
                     config.train.steps, trainer.training_seconds(), outcome.tokens_per_second,
                     config.eval.lengths.size(), config.eval.samples,
                     config.eval.extrapolation.size() > 1
                         ? fmt::format(" under {} extrapolation methods", config.eval.extrapolation.size())
                         : std::string());
  outcome.evaluation = trainer.evaluator().evaluate();  // checks for a stop signal before each length
  trainer.stop_if_requested();

  RunRecord record;
  record.run_name = config.name;
  record.config_yaml = to_yaml(config);
  record.environment = current_environment(device.str());
  record.training_seconds = trainer.training_seconds();
  record.parameter_counts = counts;
  record.training = outcome.training;
  record.evaluation = outcome.evaluation;
  record.evaluation_curve = trainer.progress().evaluation_curve;
  record.snapshots = trainer.progress().snapshots;
  record.trained_rows = trainer.trained_rows();
  record.train_min_length = config.train.min_length;
  record.train_max_length = config.train.max_length;
  record.train_steps = config.train.steps;
  std::tie(record.run_sampler, record.run_positions_max_length) = evaluation_sampler(config.positions);
  record.task_format = format_name(task->format());
  record.evaluation_protocol = task->evaluation_protocol();
  record.checkpoint = checkpoint_of(*model);
  record.attention_float16 = config.analysis.attention_float16;
  for (int64_t L : attention_map_lengths(config, *task))
    record.attention_maps.push_back(trainer.evaluator().attention_maps(L, config.analysis.attention_examples));
  if (config.analysis.probes) {
    std::vector<int64_t> probe_lengths = config.analysis.probe_lengths;
    if (probe_lengths.empty()) probe_lengths = {config.train.max_length};
    for (int64_t L : probe_lengths) {
      auto results = trainer.evaluator().probes(L);
      std::string line = fmt::format("position probes at length {} (accuracy by layer, 0 = embeddings):", L);
      for (const auto& p : results) line += fmt::format(" {:.0f}%", 100 * p.position_accuracy);
      log << line << fmt::format("; from the tokens alone {:.0f}%\n", 100 * results.front().position_chance);
      record.probes.insert(record.probes.end(), results.begin(), results.end());
    }
  }
  trainer.stop_if_requested();
  outcome.run_file = run_file;
  write_run_file(outcome.run_file, record);
  fs::remove(checkpoint_file);  // run.h5 holds the final parameters, and the curves:
  fs::remove(config.output.dir + "/" + kLiveCurveFileName);
  log << "evaluation: " << task->evaluation_protocol() << "; chance = the best input-independent prediction\n";
  log << format_evaluation_table(outcome.evaluation, config.train.max_length, task->models_text());
  log << "run file: " << outcome.run_file << "\n";
  return outcome;
}

std::string format_evaluation_table(const std::vector<EvalResult>& results, int64_t train_max_length, bool text) {
  std::string out;
  if (text) {
    out = fmt::format("{:>13} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>10} {:>9}\n", "extrapolation", "length",
                      "windows", "bits/byte", "(chance)", "ppl", "(chance)", "byte acc", "(chance)");
  } else {
    out = fmt::format("{:>13} {:>8} {:>8} {:>8} {:>10} {:>9} {:>10} {:>9} {:>9}", "extrapolation", "length",
                      "tokens", "samples", "token acc", "(chance)", "seq acc", "(chance)", "loss");
  }
  // the task's evaluation condition (passkey: depth), a column when some row has one
  std::string condition;
  for (const auto& r : results)
    if (!r.condition.empty()) condition = r.condition;
  if (!text) out += condition.empty() ? "\n" : fmt::format(" {:>9}\n", condition);
  std::vector<std::string> untrained;  // footnotes
  for (const auto& r : results) {
    std::string beyond = r.length > train_max_length ? "  (beyond training)" : "";
    if (!r.untrained.empty()) {
      auto note = std::find(untrained.begin(), untrained.end(), r.untrained);
      if (note == untrained.end()) note = untrained.insert(note, r.untrained);
      beyond += fmt::format("  !{}", note - untrained.begin() + 1);
    }
    if (text) {
      out += fmt::format("{:>13} {:>8} {:>8} {:>10.4f} {:>9.4f} {:>9.3f} {:>9.3f} {:>9.2f}% {:>8.2f}%{}\n", r.method,
                         r.length, r.samples, r.loss / std::log(2.0), r.chance_loss / std::log(2.0), std::exp(r.loss),
                         std::exp(r.chance_loss), 100.0 * r.per_token_accuracy, 100.0 * r.chance_token_accuracy,
                         beyond);
    } else {
      const std::string value = condition.empty() ? std::string()
                                : r.condition.empty() ? fmt::format(" {:>9}", "-")
                                                      : fmt::format(" {:>9.3g}", r.condition_value);
      out += fmt::format("{:>13} {:>8} {:>8} {:>8} {:>9.2f}% {:>8.2f}% {:>9.2f}% {:>8.2f}% {:>9.4f}{}{}\n", r.method,
                         r.length, r.sequence_length, r.samples, 100.0 * r.per_token_accuracy,
                         100.0 * r.chance_token_accuracy, 100.0 * r.per_sequence_accuracy,
                         100.0 * r.chance_sequence_accuracy, r.loss, value, beyond);
    }
  }
  for (size_t i = 0; i < untrained.size(); ++i)
    out += fmt::format("!{}: used position-table rows that no training step updated: {}\n", i + 1, untrained[i]);
  std::vector<std::string> free;  // the position-free baseline, where the task has one
  for (const auto& r : results)
    if (std::isfinite(r.position_free_token_accuracy) && r.method == results.front().method)
      free.push_back(fmt::format("{} {:.2f}% ({:.2f}%)", r.length, 100.0 * r.position_free_token_accuracy,
                                 100.0 * r.position_free_sequence_accuracy));
  if (!free.empty())
    out += "position-free baseline (the input's most frequent symbol at every output slot), token (seq) acc by "
           "length: " + join(free, ", ") + "\n";
  return out;
}

}  // namespace pelab
