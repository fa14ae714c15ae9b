#include "experiments/eval.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/config/yaml_reader.h"
#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "core/run/run.h"
#include "core/run/trained_run.h"
#include "core/train/stop_signal.h"
#include "core/train/evaluator.h"
#include "experiments/child_processes.h"
#include "experiments/sweep.h"

namespace pelab {

namespace fs = std::filesystem;

namespace {

// The run's config with the arguments' settings in place of its own.
void adjust_for_evaluation(const EvalArguments& a, const std::string& run_file, RunConfig& config) {
  config.threads = a.threads;
  config.device = a.device;
  if (!a.sampler.empty()) {
    config.positions.sampler = a.sampler;
    config.positions.evaluate_with = "sampler";
  }
  if (a.sampler_max_length > 0) {
    if (evaluation_sampler(config.positions).first == "contiguous")
      throw ConfigError("--sampler-max-length: " + run_file + " evaluates with contiguous positions; give --sampler "
                        "too (random_offset or randomized)");
    config.positions.max_length = a.sampler_max_length;
  }
  if (a.samples > 0) config.eval.samples = a.samples;
  if (!a.extrapolation.empty()) config.eval.extrapolation = a.extrapolation;
  if (!a.depths.empty()) config.eval.depths = a.depths;
  if (!a.p_ignore.empty()) config.eval.p_ignore = a.p_ignore;
  if (!a.lengths.empty()) config.eval.lengths = a.lengths;
  else if (!a.probes.empty() || !a.attention_lengths.empty()) config.eval.lengths = {};
  config.analysis.probe_lengths = a.probes;
  config.analysis.attention_lengths = a.attention_lengths;
}

// Evaluates one run file and adds what it made; returns a line saying what was done.
std::string evaluate_run_file(const EvalArguments& a, const std::string& run_file, std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  TrainedRun run = load_trained_run(
      run_file, [&](RunConfig& config) { adjust_for_evaluation(a, run_file, config); }, a.step);
  const RunRecord& record = run.record;
  const RunConfig& config = run.config;
  const int64_t step = run.step;
  Evaluator& evaluator = *run.evaluator;
  auto stop_if_requested = [&] {  // the run file stays as it was
    if (stop_signal() != 0) throw RunInterrupted(stop_signal(), step, "");
  };
  const auto [sampler, sampler_max_length] = evaluation_sampler(config.positions);

  RunFileAdditions added;
  added.attention_float16 = !a.float32;
  int64_t kept = 0, probed = 0;
  // whether `rows` (evaluation rows or probes) hold one of `wanted`'s settings at this step and
  // sampler, kept unless --force (counted in `kept`)
  auto kept_already = [&](const auto& rows, auto wanted) {
    wanted.step = step;
    wanted.sampler = sampler;
    wanted.positions_max_length = sampler_max_length;
    const bool keep = !a.force && std::any_of(rows.begin(), rows.end(),
                                              [&](const auto& row) { return row.same_settings(wanted); });
    kept += keep;
    return keep;
  };
  for (const auto& method : config.eval.extrapolation)
    for (int64_t length : config.eval.lengths)
      for (const auto& value : evaluator.condition_values()) {
        EvalResult wanted;
        wanted.method = method;
        wanted.length = length;
        wanted.samples = run.prepared->task->evaluation_size(length, config.eval.samples);
        if (value) {
          wanted.condition = run.prepared->task->evaluation_condition();
          wanted.condition_value = *value;
        }
        if (kept_already(record.evaluation, wanted)) continue;
        added.evaluation.push_back(evaluator.evaluate_length(length, config.eval.samples, method, true, value));
      }
  // maps and probes under the one method --extrapolation names (checked by command_eval), else none
  const std::string analysis_method = a.extrapolation.size() == 1 ? a.extrapolation.front() : "none";
  for (int64_t length : a.probes) {
    ProbeResult wanted;
    wanted.length = length;
    wanted.method = analysis_method;
    if (kept_already(record.probes, wanted)) continue;
    stop_if_requested();
    const auto probes = evaluator.probes(length, analysis_method);
    ++probed;
    added.probes.insert(added.probes.end(), probes.begin(), probes.end());
  }
  for (int64_t length : a.attention_lengths) {
    stop_if_requested();
    added.attention_maps.push_back(evaluator.attention_maps(length, a.attention_examples, analysis_method));
  }
  stop_if_requested();
  if (!added.evaluation.empty() || !added.probes.empty() || !added.attention_maps.empty())
    add_to_run_file(run_file, added);

  if (!added.evaluation.empty()) {
    out << fmt::format("{}: step {}, positions {}{}\n", run_file, step, sampler,
                       sampler_max_length > 0 ? fmt::format(" (max_length {})", sampler_max_length) : "");
    out << format_evaluation_table(added.evaluation, config.train.max_length, run.prepared->task->models_text());
  }
  for (const auto& m : added.attention_maps)
    out << fmt::format("{}: /attention/length_{}: {} examples x {} layers x {} heads x {} x {} ({}, extrapolation {})\n",
                       run_file, m.length, m.probs.size(0), m.probs.size(1), m.probs.size(2), m.probs.size(3),
                       m.probs.size(4), a.float32 ? "float32" : "float16", m.method);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fmt::format("added {} evaluation rows, probes at {} lengths, {} attention maps{} ({:.1f}s)",
                     added.evaluation.size(), probed, added.attention_maps.size(),
                     kept ? fmt::format("; {} already there (--force recomputes)", kept) : std::string(), seconds);
}

// The arguments again, for a child process evaluating one run file of a sweep.
std::vector<std::string> child_arguments(const EvalArguments& a, const std::string& pelab, const std::string& run_file,
                                         int64_t threads) {
  auto list = [](const auto& values) {
    std::vector<std::string> text;
    for (const auto& v : values) text.push_back(fmt::format("{}", v));
    return join(text, ",");
  };
  std::vector<std::string> args = {pelab, "eval", run_file, "--threads", std::to_string(threads), "--device", a.device};
  if (!a.lengths.empty()) args.insert(args.end(), {"--lengths", list(a.lengths)});
  if (a.samples > 0) args.insert(args.end(), {"--samples", std::to_string(a.samples)});
  if (!a.sampler.empty()) args.insert(args.end(), {"--sampler", a.sampler});
  if (a.sampler_max_length > 0) args.insert(args.end(), {"--sampler-max-length", std::to_string(a.sampler_max_length)});
  if (!a.extrapolation.empty()) args.insert(args.end(), {"--extrapolation", list(a.extrapolation)});
  if (!a.depths.empty()) args.insert(args.end(), {"--depths", list(a.depths)});
  if (!a.p_ignore.empty()) args.insert(args.end(), {"--p-ignore", list(a.p_ignore)});
  if (!a.probes.empty()) args.insert(args.end(), {"--probes", list(a.probes)});
  if (!a.attention_lengths.empty()) args.insert(args.end(), {"--attention-lengths", list(a.attention_lengths)});
  if (!a.attention_lengths.empty()) args.insert(args.end(), {"--examples", std::to_string(a.attention_examples)});
  if (a.float32) args.push_back("--float32");
  if (a.step >= 0) args.insert(args.end(), {"--step", std::to_string(a.step)});
  if (a.force) args.push_back("--force");
  return args;
}

int evaluate_sweep(const EvalArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err) {
  std::vector<SweepDirectoryRun> runs;
  try {
    runs = sweep_directory_runs(a.target);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  std::vector<SweepDirectoryRun> complete;
  for (const auto& run : runs)
    if (run.state == "complete") complete.push_back(run);
  const int64_t jobs = std::max<int64_t>(1, std::min<int64_t>(a.jobs, std::max<size_t>(1, complete.size())));
  const int64_t threads = threads_per_child(a.threads, jobs);
  out << fmt::format("pelab eval {}: {} complete runs of {}; {} at a time x {} threads; output in runs/<id>/eval-log.txt\n",
                     a.target, complete.size(), runs.size(), jobs, threads);
  out.flush();
  std::vector<ChildProcess> processes;
  for (const auto& run : complete)
    processes.push_back({child_arguments(a, pelab, run.dir + "/" + schema::kRunFileName, threads),
                         run.dir + "/eval-log.txt"});
  int64_t done = 0, failed = 0, interrupted = 0;
  const size_t not_started = run_child_processes(
      processes, std::vector<std::string>(jobs), nullptr,
      [&](const ChildEnd& end) {
        const auto& run = complete[end.index];
        if (WIFEXITED(end.status) && WEXITSTATUS(end.status) == 0) {
          ++done;
          out << fmt::format("[{}/{}] evaluated {} ({:.1f}s)\n", done + failed, complete.size(), run.id, end.seconds);
        } else if ((WIFEXITED(end.status) && WEXITSTATUS(end.status) == kExitInterrupted) ||
                   (WIFSIGNALED(end.status) && stop_signal() != 0)) {
          ++interrupted;
          out << fmt::format("[-/{}] stopped   {}: its run file is unchanged\n", complete.size(), run.id);
        } else {
          ++failed;
          out << fmt::format("[{}/{}] FAILED    {}: {}\n", done + failed, complete.size(), run.id,
                             child_error_line(processes[end.index].log_file, end.status, end.log_offset));
        }
      },
      "evaluation(s) (their run files stay as they were)", out);
  out << fmt::format("{} of {} runs evaluated{}{}; table: pelab report {}\n", done, complete.size(),
                     failed ? fmt::format(", {} failed", failed) : std::string(),
                     runs.size() > complete.size() ? fmt::format(" ({} not complete: left out)", runs.size() - complete.size())
                                                   : std::string(),
                     a.target);
  if (stop_signal() != 0 || interrupted > 0) {
    out << fmt::format("stopped: {} not started; the same command goes on (runs with these rows are skipped)\n",
                       not_started + interrupted);
    return kExitInterrupted;
  }
  return failed ? 1 : 0;
}

}  // namespace

int evaluate_target(const EvalArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err);

int command_eval(const EvalArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err) {
  if (a.extrapolation.size() > 1 && (!a.probes.empty() || !a.attention_lengths.empty())) {
    err << "error: --probes and --attention-lengths are made under one extrapolation method; --extrapolation names "
        << a.extrapolation.size() << " (run pelab eval once per method)\n";
    return 2;
  }
  EvalArguments arguments = a;
  if (fs::is_directory(a.target) && !fs::exists(a.target + "/runs.tsv")) {
    if (fs::exists(a.target + "/" + schema::kRunFileName)) {
      arguments.target = a.target + "/" + schema::kRunFileName;  // a run's folder: its run file, as pelab.load takes it
    } else if (fs::exists(a.target + "/checkpoint.h5")) {
      err << "error: " << a.target << " holds an unfinished run (checkpoint.h5, no run.h5 yet): pelab train CONFIG "
          << "--resume --out " << a.target << " finishes it; then evaluate it\n";
      return 2;
    }
  }
  return evaluate_target(arguments, pelab, out, err);
}

int evaluate_target(const EvalArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err) {
  if (fs::is_directory(a.target)) return evaluate_sweep(a, pelab, out, err);
  try {
    if (!fs::exists(a.target))
      throw ConfigError(a.target + " does not exist: give a run file (run.h5) or a sweep directory");
    const std::string summary = evaluate_run_file(a, a.target, out);
    out << a.target << ": " << summary << "\n";
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const RunInterrupted& e) {
    err << "interrupted by " << signal_name(e.signal) << ": " << a.target << " is unchanged\n";
    return kExitInterrupted;
  } catch (const c10::Error& e) {
    err << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace pelab
