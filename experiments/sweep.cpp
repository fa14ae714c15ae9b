#include "experiments/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/encodings/registry.h"
#include "core/io/atomic_file.h"
#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "core/config/yaml_reader.h"
#include "core/train/checkpoint.h"
#include "core/train/stop_signal.h"
#include "data/task_registry.h"

extern char** environ;

namespace pelab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "runs.tsv";
constexpr const char* kFailedFile = "failed.txt";
constexpr const char* kLogFile = "log.txt";

std::string run_file_of(const SweepRun& run) { return run.dir + "/" + schema::kRunFileName; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last line of a failed run's log that says what went wrong, looking only at what the
// last attempt wrote (from byte `from`: the log is appended across attempts).
std::string error_line(const std::string& log_path, int status, std::uintmax_t from) {
  const std::string text = read_text(log_path);
  std::istringstream log(from < text.size() ? text.substr(from) : std::string());
  std::string line, error;
  while (std::getline(log, line))
    if (line.rfind("error:", 0) == 0) error = line;
  if (!error.empty()) return error;
  if (WIFSIGNALED(status)) return fmt::format("error: killed by signal {}", WTERMSIG(status));
  return fmt::format("error: exit status {} (see {})", WIFEXITED(status) ? WEXITSTATUS(status) : -1, log_path);
}

void write_manifest(const std::string& sweep_dir, const std::vector<SweepRun>& runs) {
  fs::create_directories(sweep_dir);
  std::ostringstream out;
  out << "index\tid\toverrides\n";
  for (const auto& r : runs) out << r.index << "\t" << r.id << "\t" << join(r.overrides, " ") << "\n";
  write_file_atomically(sweep_dir + "/" + kManifest, out.str(), "the sweep's run list");
}

struct ManifestRow {
  int64_t index;
  std::string id, overrides;
};

std::vector<ManifestRow> read_manifest(const std::string& sweep_dir) {
  const std::string path = sweep_dir + "/" + kManifest;
  if (!fs::exists(path))
    throw std::runtime_error(path + " does not exist: not a sweep directory (pelab sweep writes it)");
  std::istringstream in(read_text(path));
  std::string line;
  std::getline(in, line);  // header
  std::vector<ManifestRow> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto a = line.find('\t'), b = line.find('\t', a + 1);
    rows.push_back({std::stoll(line.substr(0, a)), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return rows;
}

// Pending runs with a checkpoint.h5 are Resumable: the next sweep continues them.
enum class RunState { Complete, Failed, Pending, Resumable };

RunState state_of(const std::string& run_dir) {
  if (is_complete_run_file(run_dir + "/" + schema::kRunFileName)) return RunState::Complete;
  if (fs::exists(run_dir + "/" + kFailedFile)) return RunState::Failed;
  if (fs::exists(run_dir + "/" + kCheckpointFileName)) return RunState::Resumable;
  return RunState::Pending;
}

const char* state_name(RunState state) {
  switch (state) {
    case RunState::Complete: return "complete";
    case RunState::Failed: return "failed";
    case RunState::Resumable: return "resumable";
    default: return "pending";
  }
}

void write_index(const std::string& sweep_dir, const std::string& name, const std::vector<ManifestRow>& rows) {
  std::vector<SweepIndexEntry> entries;
  for (const auto& row : rows) {
    const std::string dir = sweep_dir + "/runs/" + row.id;
    const RunState state = state_of(dir);
    SweepIndexEntry e;
    e.id = row.id;
    e.overrides = row.overrides;
    e.status = state == RunState::Resumable ? "pending" : state_name(state);
    if (state == RunState::Failed) {
      e.error = read_text(dir + "/" + kFailedFile);
      while (!e.error.empty() && e.error.back() == '\n') e.error.pop_back();
    }
    e.run_file = "runs/" + row.id + "/" + schema::kRunFileName;
    entries.push_back(e);
  }
  write_sweep_index(sweep_dir + "/" + schema::kSweepIndexFileName, name, entries);
}

// What a kill -9 can leave in a run directory besides a whole run.h5 or checkpoint.h5: a
// temporary file of a write it interrupted, and (killed between the two) the checkpoint of
// a run whose run.h5 is complete.
void remove_leftovers(const std::string& run_dir) {
  std::error_code error;
  for (const char* name : {schema::kRunFileName, kCheckpointFileName})
    fs::remove(run_dir + "/" + name + ".tmp", error);
  if (is_complete_run_file(run_dir + "/" + schema::kRunFileName)) fs::remove(run_dir + "/" + kCheckpointFileName, error);
}

struct RunningRun {
  int64_t index;
  std::chrono::steady_clock::time_point start;
  std::uintmax_t log_offset;  // where this attempt's output starts in log.txt
};

// Starts `pelab train --resume` for one run with its output appended to run.dir/log.txt.
pid_t start_run(const std::string& pelab, const SweepConfig& sweep, const SweepRun& run, int64_t threads) {
  fs::create_directories(run.dir);
  fs::remove(run.dir + "/" + kFailedFile);
  remove_leftovers(run.dir);
  std::vector<std::string> args = {pelab, "train", sweep.base, "--resume"};
  for (const auto& o : run.all_overrides) args.insert(args.end(), {"--set", o});
  args.insert(args.end(), {"--set", "name=" + run.id, "--set", "threads=" + std::to_string(threads), "--out", run.dir});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = run.dir + "/" + kLogFile;
  // appended: a resumed run's log keeps the earlier attempts
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, pelab.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + pelab + ": " + std::strerror(rc));
  return pid;
}

enum class RunEnd { Complete, Interrupted, Failed };

// Records a finished run process: complete, interrupted (it checkpointed and exited with
// kExitInterrupted: the next sweep resumes it), or failed (failed.txt holds the error).
// A run killed by the signal the sweep forwarded (before it could install its handlers) is
// interrupted too.
RunEnd finish_run(const SweepRun& run, int status, std::uintmax_t log_offset, std::string& error) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && is_complete_run_file(run_file_of(run))) return RunEnd::Complete;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitInterrupted) return RunEnd::Interrupted;
  if (WIFSIGNALED(status) && stop_signal() != 0 && WTERMSIG(status) == stop_signal()) return RunEnd::Interrupted;
  error = error_line(run.dir + "/" + kLogFile, status, log_offset);
  try {
    write_file_atomically(run.dir + "/" + kFailedFile, error + "\n", "the run's failure note");
  } catch (const std::exception& e) {
    error += fmt::format(" ({})", e.what());
  }
  return RunEnd::Failed;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

int submit_slurm(const SweepArguments& a, const SweepConfig& sweep, const std::vector<SweepRun>& runs,
                 const std::vector<int64_t>& todo, const std::string& pelab, std::ostream& out, std::ostream& err) {
  SlurmSettings s = sweep.slurm;
  if (a.partition_set) s.partition = a.slurm_overrides.partition;
  if (a.time_set) s.time = a.slurm_overrides.time;
  if (a.cpus_set) s.cpus_per_task = a.slurm_overrides.cpus_per_task;
  if (a.gpus_set) s.gpus = a.slurm_overrides.gpus;
  if (a.mem_set) s.mem = a.slurm_overrides.mem;
  const std::string dir = fs::absolute(sweep.output).lexically_normal().string();
  fs::create_directories(dir + "/slurm");
  std::vector<std::string> indices;
  for (int64_t i : todo) indices.push_back(std::to_string(i));
  const std::string script_path = dir + "/slurm/sweep.sbatch";
  {
    std::ostringstream script;
    script << "#!/bin/bash\n"
           << "# pelab sweep " << sweep.file << ": one array task per run not yet complete\n"
           << "#SBATCH --job-name=pelab-" << sweep.name << "\n"
           << "#SBATCH --array=" << join(indices, ",") << "\n"
           << "#SBATCH --output=" << dir << "/slurm/%A_%a.log\n"
           << "#SBATCH --cpus-per-task=" << s.cpus_per_task << "\n"
           << "#SBATCH --time=" << s.time << "\n";
    if (!s.partition.empty()) script << "#SBATCH --partition=" << s.partition << "\n";
    if (!s.mem.empty()) script << "#SBATCH --mem=" << s.mem << "\n";
    if (s.gpus > 0) script << "#SBATCH --gres=gpu:" << s.gpus << "\n";
    // Slurm's preemption and the warning 120 s before the time limit (--signal) reach the
    // batch shell, which passes them to pelab: the run checkpoints and exits with 75, and the
    // task requeues itself; the next attempt resumes from the checkpoint.
    script << "#SBATCH --requeue\n"
           << "#SBATCH --open-mode=append\n"
           << "#SBATCH --signal=B:TERM@120\n"
           << "cd " << quoted(fs::current_path().string()) << "\n"
           << "stopping=\n"
           << "trap 'stopping=1; kill -TERM \"$pelab_pid\" 2>/dev/null' TERM INT\n"
           << quoted(pelab) << " sweep " << quoted(fs::absolute(sweep.file).string())
           << " --run-index \"$SLURM_ARRAY_TASK_ID\" --threads \"${SLURM_CPUS_PER_TASK:-1}\" &\n"
           << "pelab_pid=$!\n"
           << "wait \"$pelab_pid\"; status=$?\n"
           << "while [ -n \"$stopping\" ]; do stopping=; wait \"$pelab_pid\"; status=$?; done\n"
           << "if [ \"$status\" -eq " << kExitInterrupted << " ]; then\n"
           << "  echo \"pelab: stopped by a signal after a checkpoint; requeueing ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n"
           << "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n"
           << "fi\n"
           << "exit \"$status\"\n";
    try {
      write_file_atomically(script_path, script.str(), "the Slurm script");
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return 1;
    }
  }
  out << fmt::format("wrote {} ({} array tasks: {} runs not complete of {})\n", script_path, todo.size(), todo.size(),
                     runs.size());
  if (a.no_submit) {
    out << "submit it with: sbatch " << script_path << "\n";
    return 0;
  }
  FILE* pipe = popen(("sbatch --parsable " + quoted(script_path) + " 2>&1").c_str(), "r");
  if (!pipe) {
    err << "error: cannot run sbatch\n";
    return 1;
  }
  std::string reply;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) reply += buffer;
  const int status = pclose(pipe);
  while (!reply.empty() && (reply.back() == '\n' || reply.back() == ' ')) reply.pop_back();
  if (status != 0) {
    err << "error: sbatch failed: " << reply << "\n";
    return 1;
  }
  const std::string job = reply.substr(0, reply.find(';'));
  out << fmt::format("submitted Slurm job {} ({} array tasks)\n  follow:  squeue -j {}\n  logs:    {}/slurm/{}_*.log\n"
                     "  results: pelab report {}\n",
                     job, todo.size(), job, dir, job, sweep.output);
  return 0;
}

}  // namespace

int command_sweep(const SweepArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err) {
  SweepConfig sweep;
  std::vector<SweepRun> runs;
  try {
    sweep = load_sweep_config(a.sweep_path);
    runs = expand_sweep(sweep, scheme_catalog(), task_catalog());
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  if (a.run_index >= static_cast<int64_t>(runs.size())) {
    err << fmt::format("error: --run-index {} is out of range: the sweep has {} runs\n", a.run_index, runs.size());
    return 2;
  }
  std::vector<int64_t> todo;
  int64_t complete = 0, failed_before = 0, resumable = 0;
  for (const auto& run : runs) {
    const RunState state = state_of(run.dir);
    if (state == RunState::Complete) ++complete;
    else todo.push_back(run.index);
    if (state == RunState::Complete && !a.dry_run) remove_leftovers(run.dir);
    if (state == RunState::Failed) ++failed_before;
    if (state == RunState::Resumable) ++resumable;
  }
  if (a.dry_run) {
    out << fmt::format("sweep '{}': {} runs ({} complete), base {}, in {}\n", sweep.name, runs.size(), complete,
                       sweep.base, sweep.output);
    for (const auto& run : runs) {
      const RunState state = state_of(run.dir);
      out << fmt::format("  {:>4}  {:<9} {}  [{}]\n", run.index, state_name(state), run.id,
                         join(run.overrides, " "));
    }
    return 0;
  }
  // Not on a dry run, which writes nothing, nor in a Slurm array task (--run-index): the
  // submission wrote it, and the tasks run side by side (their writes would race on one
  // temporary file).
  try {
    if (a.run_index < 0) write_manifest(sweep.output, runs);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  if (a.slurm) {
    if (todo.empty()) {
      out << "every run is complete; nothing to submit\n";
      return 0;
    }
    return submit_slurm(a, sweep, runs, todo, pelab, out, err);
  }
  if (a.run_index >= 0) todo = state_of(runs[a.run_index].dir) == RunState::Complete
                                   ? std::vector<int64_t>{} : std::vector<int64_t>{a.run_index};

  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t jobs = std::max<int64_t>(1, std::min<int64_t>(a.jobs, std::max<size_t>(1, todo.size())));
  const int64_t threads = a.threads > 0 ? a.threads : std::max<int64_t>(1, cores / jobs);
  out << fmt::format("sweep '{}': {} runs, {} complete, {} to run{}{}; {} at a time x {} threads; in {}\n", sweep.name,
                     runs.size(), complete, todo.size(),
                     resumable ? fmt::format(" ({} resumed from checkpoints)", resumable) : std::string(),
                     failed_before ? fmt::format(" ({} failed before: retried)", failed_before) : std::string(), jobs,
                     threads, sweep.output);
  out.flush();
  // SIGINT/SIGTERM (handlers installed by main): start nothing more, pass the signal on to the runs (they checkpoint and
  // exit with kExitInterrupted), wait for them, and exit with kExitInterrupted too. The loop
  // polls (waitpid WNOHANG, 50 ms naps) so that a signal is seen within 50 ms whenever it lands.
  std::map<pid_t, RunningRun> running;
  size_t next = 0;
  int64_t done = 0, failed = 0, interrupted = 0;
  bool forwarded = false;
  while ((next < todo.size() && stop_signal() == 0) || !running.empty()) {
    while (next < todo.size() && stop_signal() == 0 && static_cast<int64_t>(running.size()) < jobs) {
      const SweepRun& run = runs[todo[next++]];
      std::error_code no_log;
      const auto log_offset = fs::file_size(run.dir + "/" + kLogFile, no_log);
      running[start_run(pelab, sweep, run, threads)] = {run.index, std::chrono::steady_clock::now(),
                                                         no_log ? 0 : log_offset};
    }
    if (stop_signal() != 0 && !forwarded) {
      for (const auto& [child, entry] : running) kill(child, stop_signal());
      forwarded = true;
      out << fmt::format("{}: stopping {} run(s) at their next step (they write checkpoints)\n",
                         signal_name(stop_signal()), running.size());
      out.flush();
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const SweepRun& run = runs[it->second.index];
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.start).count();
    const std::uintmax_t log_offset = it->second.log_offset;
    running.erase(it);
    std::string error;
    switch (finish_run(run, status, log_offset, error)) {
      case RunEnd::Complete:
        ++done;
        out << fmt::format("[{}/{}] complete  {} ({:.0f}s)\n", done + failed, todo.size(), run.id, seconds);
        break;
      case RunEnd::Interrupted:
        ++interrupted;
        out << fmt::format("[-/{}] stopped   {} ({:.0f}s): checkpointed, resumed by the next sweep\n", todo.size(),
                           run.id, seconds);
        break;
      case RunEnd::Failed:
        ++failed;
        out << fmt::format("[{}/{}] FAILED    {} ({:.0f}s): {}\n", done + failed, todo.size(), run.id, seconds, error);
        break;
    }
    out.flush();
  }
  std::vector<ManifestRow> rows;
  for (const auto& r : runs) rows.push_back({r.index, r.id, join(r.overrides, " ")});
  if (a.run_index < 0) {
    write_index(sweep.output, sweep.name, rows);
    out << fmt::format("{} of {} runs complete{}; index {}/{}; table: pelab report {}\n", complete + done, runs.size(),
                       failed ? fmt::format(", {} failed (runs/<id>/failed.txt, log.txt)", failed) : std::string(),
                       sweep.output, schema::kSweepIndexFileName, sweep.output);
  }
  if (stop_signal() != 0) {
    out << fmt::format("stopped by {}: {} run(s) checkpointed, {} not started; the same command resumes the sweep\n",
                       signal_name(stop_signal()), interrupted, todo.size() - next);
    return kExitInterrupted;
  }
  if (interrupted > 0) return kExitInterrupted;  // runs stopped by signals sent to them alone
  return failed ? 1 : 0;
}

namespace {

struct Cell {
  std::vector<double> values, chance;
};

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? NAN : sum / v.size();
}

double std_of(const std::vector<double>& v) {  // sample standard deviation; 0 for one value
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / (v.size() - 1));
}

// "encoding.name=rope seed=1 eval.lengths=[5, 10]" -> "encoding=rope lengths=[5, 10]": the
// axis values but the seed, labelled as in run ids.
std::string without_seed(const std::string& overrides) {
  std::vector<std::string> items;  // split before each "key=" (values may hold spaces: [5, 10])
  std::istringstream in(overrides);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    const bool starts_item = eq != std::string::npos && word.find('[') > eq && word.find('{') > eq;
    if (starts_item || items.empty()) items.push_back(word);
    else items.back() += " " + word;
  }
  std::string out;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (item.substr(0, eq) == "seed") continue;
    out += (out.empty() ? "" : " ") + axis_label(item.substr(0, eq)) + item.substr(eq);
  }
  return out.empty() ? "(base)" : out;
}

}  // namespace

int command_report(const ReportArguments& a, std::ostream& out, std::ostream& err) {
  std::vector<ManifestRow> rows;
  try {
    rows = read_manifest(a.sweep_dir);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  if (a.metric != "token" && a.metric != "sequence" && a.metric != "loss") {
    err << "error: --metric must be token, sequence or loss\n";
    return 2;
  }
  // group (axis values without the seed) x method -> length -> values over seeds
  std::vector<std::string> groups;
  std::map<std::pair<std::string, std::string>, std::map<int64_t, Cell>> table;
  std::set<int64_t> lengths;
  std::set<std::string> methods;
  int64_t train_max = 0, complete = 0;
  std::vector<std::string> problems;
  for (const auto& row : rows) {
    const std::string dir = a.sweep_dir + "/runs/" + row.id;
    const RunState state = state_of(dir);
    if (state != RunState::Complete) {
      problems.push_back(fmt::format("  {} {}{}", row.id, state == RunState::Failed ? "failed:" : "is not complete",
                                     state == RunState::Failed ? " " + read_text(dir + "/" + kFailedFile) : "\n"));
      continue;
    }
    ++complete;
    const RunRecord record = read_run_file(dir + "/" + schema::kRunFileName, /*with_checkpoint=*/false);
    train_max = std::max(train_max, record.train_max_length);
    const std::string group = without_seed(row.overrides);
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
    for (const auto& e : record.evaluation) {
      Cell& cell = table[{group, e.method}][e.length];
      lengths.insert(e.length);
      methods.insert(e.method);
      if (a.metric == "token") {
        cell.values.push_back(100 * e.per_token_accuracy);
        cell.chance.push_back(100 * e.chance_token_accuracy);
      } else if (a.metric == "sequence") {
        cell.values.push_back(100 * e.per_sequence_accuracy);
        cell.chance.push_back(100 * e.chance_sequence_accuracy);
      } else {
        cell.values.push_back(e.loss);
        cell.chance.push_back(e.chance_loss);
      }
    }
  }
  try {
    write_index(a.sweep_dir, fs::path(a.sweep_dir).filename().string(), rows);
  } catch (const std::exception& e) {
    err << "warning: could not write the sweep index: " << e.what() << "\n";
  }
  const std::string what = a.metric == "token"      ? "per-token accuracy (%)"
                           : a.metric == "sequence" ? "per-sequence accuracy (%)"
                                                    : "loss (nats per scored token)";
  out << fmt::format("{}: {}, mean +- std over seeds (n); {} of {} runs complete; lengths > {} are beyond training\n",
                     a.sweep_dir, what, complete, rows.size(), train_max);
  const bool several_methods = methods.size() > 1;
  // Markdown and the printed table share their rows.
  std::vector<std::string> header = {"run"};
  for (int64_t L : lengths) header.push_back(std::to_string(L) + (L > train_max ? "*" : ""));
  std::vector<std::vector<std::string>> lines;
  std::ostringstream csv;
  csv << "group,method,length,beyond_training,metric,mean,std,seeds,chance\n";
  std::map<int64_t, std::vector<double>> chance_by_length;
  for (const auto& group : groups)
    for (const auto& method : methods) {
      auto found = table.find({group, method});
      if (found == table.end()) continue;
      std::vector<std::string> line = {several_methods ? group + " [" + method + "]" : group};
      for (int64_t L : lengths) {
        auto c = found->second.find(L);
        if (c == found->second.end()) {
          line.push_back("");
          continue;
        }
        const double m = mean_of(c->second.values), sd = std_of(c->second.values);
        line.push_back(a.metric == "loss" ? fmt::format("{:.3f} +- {:.3f} ({})", m, sd, c->second.values.size())
                                          : fmt::format("{:.1f} +- {:.1f} ({})", m, sd, c->second.values.size()));
        for (double x : c->second.chance) chance_by_length[L].push_back(x);
        csv << fmt::format("\"{}\",{},{},{},{},{:.6g},{:.6g},{},{:.6g}\n", group, method, L, L > train_max ? 1 : 0,
                           a.metric, m, sd, c->second.values.size(), mean_of(c->second.chance));
      }
      lines.push_back(line);
    }
  std::vector<std::string> chance_line = {"chance"};
  for (int64_t L : lengths)
    chance_line.push_back(fmt::format(a.metric == "loss" ? "{:.3f}" : "{:.1f}", mean_of(chance_by_length[L])));
  lines.push_back(chance_line);

  std::vector<size_t> width(header.size(), 0);
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& line : lines)
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string text = fmt::format("{:<{}}", cells[0], width[0]);
    for (size_t i = 1; i < cells.size(); ++i) text += fmt::format("  {:>{}}", cells[i], width[i]);
    out << text << "\n";
  };
  print_row(header);
  for (const auto& line : lines) print_row(line);
  if (!problems.empty()) {
    out << problems.size() << " run(s) left out:\n";
    for (const auto& p : problems) out << p;
  }
  std::ostringstream md;
  md << "Sweep `" << a.sweep_dir << "`: " << what << ", mean +- std over seeds (n). * beyond training (> "
     << train_max << "). Chance: the best input-independent prediction.\n\n";
  md << "| " << join(header, " | ") << " |\n|";
  for (size_t i = 0; i < header.size(); ++i) md << (i ? "---:|" : "---|");
  md << "\n";
  for (const auto& line : lines) md << "| " << join(line, " | ") << " |\n";
  try {
    write_file_atomically(a.sweep_dir + "/report.csv", csv.str(), "the report");
    write_file_atomically(a.sweep_dir + "/report.md", md.str(), "the report");
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  out << "wrote " << a.sweep_dir << "/report.csv, " << a.sweep_dir << "/report.md\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace pelab
