#include "experiments/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
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

#include "experiments/child_processes.h"
#include "core/encodings/registry.h"
#include "core/io/atomic_file.h"
#include "core/io/csv_fields.h"
#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "core/config/yaml_reader.h"
#include "core/model/run_generator.h"
#include "core/run/run.h"
#include "core/train/checkpoint.h"
#include "core/train/cuda_graph_step.h"
#include "core/train/progress.h"
#include "core/train/stop_signal.h"
#include "data/task_registry.h"


namespace pelab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "runs.tsv";
constexpr const char* kFailedFile = "failed.txt";
constexpr const char* kLogFile = "log.txt";

// --only KEY=VALUE...: which runs are chosen (all when none is given). A key given several
// times takes any of its values; different keys must all match. A key that is not an axis, or
// a value no run has, is a ConfigError naming what the sweep has.
std::vector<bool> runs_chosen(const std::vector<SweepRun>& runs, const std::vector<std::string>& only) {
  std::map<std::string, std::set<std::string>> wanted;  // key -> values
  for (const auto& entry : only) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--only " + entry + ": expected KEY=VALUE, e.g. --only seed=0");
    wanted[entry.substr(0, eq)].insert(entry.substr(eq + 1));
  }
  std::map<std::string, std::set<std::string>> axes;  // key -> the values the runs have
  std::vector<std::map<std::string, std::string>> values_of(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& item : runs[i].overrides) {
      const auto eq = item.find('=');
      values_of[i][item.substr(0, eq)] = item.substr(eq + 1);
      axes[item.substr(0, eq)].insert(item.substr(eq + 1));
    }
  for (const auto& [key, values] : wanted) {
    std::vector<std::string> keys;
    for (const auto& axis : axes) keys.push_back(axis.first);
    if (!axes.count(key)) throw ConfigError("--only " + key + ": not an axis of the sweep; its axes: " + join(keys));
    for (const auto& value : values)
      if (!axes[key].count(value))
        throw ConfigError(fmt::format("--only {}={}: no run has it; {} takes: {}", key, value, key,
                                      join(std::vector<std::string>(axes[key].begin(), axes[key].end()))));
  }
  std::vector<bool> chosen(runs.size(), true);
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& [key, values] : wanted) chosen[i] = chosen[i] && values.count(values_of[i][key]) > 0;
  return chosen;
}

// What differs between the config a complete run was trained with (its run.h5) and the one
// this sweep gives it (config_differences: name, threads, device, output.dir and the like
// are not differences); empty when they agree.
std::vector<std::string> trained_otherwise(const SweepConfig& sweep, const SweepRun& run) {
  const std::string run_file = run.dir + "/" + schema::kRunFileName;
  std::vector<std::string> overrides = run.all_overrides;
  overrides.push_back("output.dir=" + run.dir);
  const RunConfig config = load_run_config(sweep.base, overrides, scheme_catalog(), task_catalog());
  return differences_from_stored(run_file, read_run_file(run_file, /*with_checkpoint=*/false).config_yaml, config);
}

// The run ids a per-run file (pelab report's report_runs.csv; --skip-runs-in) holds, its first
// column. Those among the chosen runs must have trained as this sweep would train them: the
// same task, axis values and steps (another task's file has the same run ids; rows of 2,000
// steps do not stand for a sweep of 10,000). ConfigError for a file without that header, and
// naming the first run that differs.
std::set<std::string> runs_held_by(const std::string& path, const SweepConfig& sweep, const std::vector<SweepRun>& runs,
                                   const std::vector<bool>& chosen) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line.rfind("run,", 0) != 0)
    throw ConfigError("--skip-runs-in " + path + ": not a per-run file (pelab report's report_runs.csv)");
  const auto columns = csv_fields(line);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
  };
  const size_t overrides_at = column("overrides"), steps_at = column("train_steps"),
               task_at = column("task");  // columns.size(): not there (a file from before it was added)
  if (overrides_at == columns.size() || steps_at == columns.size())
    throw ConfigError("--skip-runs-in " + path + ": no columns 'overrides' and 'train_steps'");
  std::map<std::string, const SweepRun*> chosen_by_id;
  for (const auto& run : runs)
    if (chosen[run.index]) chosen_by_id[run.id] = &run;
  std::set<std::string> ids, checked;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto cells = csv_fields(line);
    ids.insert(cells[0]);  // ids have no commas or quotes
    const auto run = chosen_by_id.find(cells[0]);
    if (run == chosen_by_id.end() || cells.size() != columns.size() || !checked.insert(run->first).second) continue;
    const std::string settings = join(run->second->overrides, " ");
    const RunConfig config = load_run_config(sweep.base, run->second->all_overrides, scheme_catalog(), task_catalog());
    std::string differs;
    if (cells[overrides_at] != settings) differs = fmt::format("the settings [{}], not [{}]", cells[overrides_at], settings);
    else if (task_at < columns.size() && !cells[task_at].empty() && cells[task_at] != config.task.name)
      differs = fmt::format("the task {}, not {}", cells[task_at], config.task.name);
    else if (cells[steps_at] != std::to_string(config.train.steps))
      differs = fmt::format("{} steps, not {}", cells[steps_at], config.train.steps);
    if (!differs.empty())
      throw ConfigError(fmt::format("--skip-runs-in {}: its run {} trained with {} as this sweep would train it; "
                                    "its rows do not stand for this sweep's run (give this protocol's runs their "
                                    "own per-run file)", path, run->first, differs));
  }
  return ids;
}

// "165" or, with --only, "99 of 165"
std::string only_text(size_t runs, int64_t chosen) {
  return static_cast<int64_t>(runs) == chosen ? std::to_string(runs) : fmt::format("{} of {}", chosen, runs);
}

std::string run_file_of(const SweepRun& run) { return run.dir + "/" + schema::kRunFileName; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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

// Pending runs with a checkpoint.h5 are Resumable: the next sweep continues them. Outdated:
// a complete run file of another schema version (another pelab), which is left alone.
enum class RunState { Complete, Failed, Pending, Resumable, Outdated };

RunState state_of(const std::string& run_dir) {
  const int64_t version = complete_run_file_version(run_dir + "/" + schema::kRunFileName);
  if (version == schema::kSchemaVersion) return RunState::Complete;
  if (version >= 0) return RunState::Outdated;
  if (fs::exists(run_dir + "/" + kFailedFile)) return RunState::Failed;
  if (fs::exists(run_dir + "/" + kCheckpointFileName)) return RunState::Resumable;
  return RunState::Pending;
}

const char* state_name(RunState state) {
  switch (state) {
    case RunState::Complete: return "complete";
    case RunState::Failed: return "failed";
    case RunState::Resumable: return "resumable";
    case RunState::Outdated: return "outdated";
    default: return "pending";
  }
}

// The runs of `rows` in sweep_dir as they stand (SweepDirectoryRun).
std::vector<SweepDirectoryRun> directory_runs(const std::string& sweep_dir, const std::vector<ManifestRow>& rows) {
  std::vector<SweepDirectoryRun> runs;
  for (const auto& row : rows) {
    SweepDirectoryRun run{row.id, row.overrides, sweep_dir + "/runs/" + row.id, "", ""};
    const RunState state = state_of(run.dir);
    run.state = state_name(state);
    if (state == RunState::Failed) {
      run.error = read_text(run.dir + "/" + kFailedFile);
      while (!run.error.empty() && run.error.back() == '\n') run.error.pop_back();
    }
    runs.push_back(run);
  }
  return runs;
}

void write_index(const std::string& sweep_dir, const std::string& name, const std::vector<SweepDirectoryRun>& runs) {
  std::vector<SweepIndexEntry> entries;
  for (const auto& run : runs) {
    SweepIndexEntry e;
    e.id = run.id;
    e.overrides = run.overrides;
    e.status = run.state == "resumable" ? "pending" : run.state;
    e.error = run.error;
    e.run_file = "runs/" + run.id + "/" + schema::kRunFileName;
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

// `pelab train --resume` of one run, its output appended to run.dir/log.txt (a resumed run's
// log keeps the earlier attempts).
ChildProcess train_process(const std::string& pelab, const SweepConfig& sweep, const SweepRun& run, int64_t threads) {
  std::vector<std::string> args = {pelab, "train", sweep.base, "--resume"};
  for (const auto& o : run.all_overrides) args.insert(args.end(), {"--set", o});
  args.insert(args.end(), {"--set", "name=" + run.id, "--set", "threads=" + std::to_string(threads), "--out", run.dir});
  return {args, run.dir + "/" + kLogFile};
}

// The command line's --set and --output, forwarded to the child processes that load the sweep
// file again (packed processes, Slurm tasks).
std::vector<std::string> forwarded_arguments(const SweepArguments& a) {
  std::vector<std::string> args;
  for (const auto& entry : a.set) args.insert(args.end(), {"--set", entry});
  if (!a.output.empty()) args.insert(args.end(), {"--output", a.output});
  return args;
}

// One child process training `indices` in itself (the packed runner: `pelab sweep
// --run-index ... --in-process`), its output appended to log_file.
ChildProcess packed_process(const std::string& pelab, const SweepConfig& sweep, const SweepArguments& a,
                            const std::vector<int64_t>& indices, int64_t threads, const std::string& log_file) {
  std::vector<std::string> index_list;
  for (int64_t i : indices) index_list.push_back(std::to_string(i));
  std::vector<std::string> args = {pelab, "sweep", sweep.file, "--run-index", join(index_list, ","), "--in-process",
                                   "--threads", std::to_string(threads)};
  for (const auto& arg : forwarded_arguments(a)) args.push_back(arg);
  return {args, log_file};
}

enum class RunEnd { Complete, Interrupted, Failed };

// Trains `indices` of `runs` in this process, each on a host thread of its own, with its own
// CPU random stream (core/model/run_generator.h) and, on a GPU, its own CUDA stream, so the
// kernels of different runs overlap. Each run writes what it would alone: its log.txt,
// checkpoints, run.h5 or failed.txt; one failing leaves the others running. -> 0 when every
// run completed, kExitInterrupted when some stopped at a signal (checkpointed), else 1.
int train_in_process(const SweepConfig& sweep, const std::vector<SweepRun>& runs, const std::vector<int64_t>& indices,
                     int64_t threads, std::ostream& out) {
  std::vector<RunEnd> ends(indices.size(), RunEnd::Failed);
  std::vector<std::string> errors(indices.size());
  auto train_one = [&](size_t k) {
    const SweepRun& run = runs[indices[k]];
    std::ofstream log(run.dir + "/" + kLogFile, std::ios::app);
    std::string name = run.id;
    try {
      std::vector<std::string> overrides = run.all_overrides;
      overrides.insert(overrides.end(), {"name=" + run.id, "threads=" + std::to_string(threads), "output.dir=" + run.dir});
      const RunConfig config = load_run_config(sweep.base, overrides, scheme_catalog(), task_catalog());
      // on a GPU, the run's own CUDA stream for everything it launches
      std::unique_ptr<SideStream> stream;
      std::unique_ptr<SideStream::Scope> on_stream;
      if (resolve_device(config.device).is_cuda()) {
        stream = std::make_unique<SideStream>();
        on_stream = std::make_unique<SideStream::Scope>(*stream);
      }
      execute_run(config, log, /*interactive=*/false, /*resume=*/true);
      ends[k] = RunEnd::Complete;
    } catch (const RunInterrupted& e) {
      log << "interrupted: run '" << name << "' " << e.what() << "\n";
      ends[k] = RunEnd::Interrupted;
    } catch (const c10::Error& e) {  // LibTorch's what() carries a C++ backtrace: leave it out
      errors[k] = fmt::format("error: run '{}' failed: {}", name, e.what_without_backtrace());
    } catch (const std::exception& e) {
      errors[k] = fmt::format("error: run '{}' failed: {}", name, e.what());
    }
    if (ends[k] == RunEnd::Failed) {
      log << errors[k] << "\n";
      try {
        write_file_atomically(run.dir + "/" + kFailedFile, errors[k] + "\n", "the run's failure note");
      } catch (const std::exception& e) {
        errors[k] += fmt::format(" ({})", e.what());
      }
    }
  };
  // LibTorch's sync debug mode is process-wide: with several runs it stays off (the graphed
  // steps then find read-backs by a failed capture)
  if (indices.size() > 1) SyncCheck::shared_process();
  std::vector<std::thread> workers;
  for (size_t k = 0; k < indices.size(); ++k) {
    const SweepRun& run = runs[indices[k]];
    fs::create_directories(run.dir);
    fs::remove(run.dir + "/" + kFailedFile);
    remove_leftovers(run.dir);
    workers.emplace_back(train_one, k);
  }
  for (auto& worker : workers) worker.join();
  int64_t failed = 0, interrupted = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const SweepRun& run = runs[indices[k]];
    switch (ends[k]) {
      case RunEnd::Complete: out << "complete " << run.id << "\n"; break;
      case RunEnd::Interrupted: out << "stopped " << run.id << "\n"; ++interrupted; break;
      case RunEnd::Failed: out << errors[k] << "\n"; ++failed; break;
    }
  }
  if (interrupted > 0) return kExitInterrupted;
  return failed > 0 ? 1 : 0;
}

// Records a finished run process: complete, interrupted (it checkpointed and exited with
// kExitInterrupted: the next sweep resumes it), or failed (failed.txt holds the error).
// A run killed by the signal the sweep forwarded (before it could install its handlers) is
// interrupted too.
// `log_file`: the process's log (the run's log.txt, or a packed process's own).
RunEnd finish_run(const SweepRun& run, int status, std::uintmax_t log_offset, std::string& error,
                  const std::string& log_file) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && is_complete_run_file(run_file_of(run))) return RunEnd::Complete;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitInterrupted) return RunEnd::Interrupted;
  if (WIFSIGNALED(status) && stop_signal() != 0 && WTERMSIG(status) == stop_signal()) return RunEnd::Interrupted;
  error = child_error_line(log_file, status, log_offset);
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
  if (a.runs_per_task_set) s.runs_per_task = a.slurm_overrides.runs_per_task;
  const int64_t per_task = s.runs_per_task;
  const std::string dir = fs::absolute(sweep.output).lexically_normal().string();
  fs::create_directories(dir + "/slurm");
  // one array task per run (its index), or per group of per_task runs (the group's number)
  std::vector<std::string> indices, groups;
  for (int64_t i : todo) indices.push_back(std::to_string(i));
  for (size_t first = 0; first < indices.size(); first += per_task)
    groups.push_back(join(std::vector<std::string>(indices.begin() + first,
                                                   indices.begin() + std::min(indices.size(), first + per_task)),
                          ","));
  std::string mem = s.mem;  // per run; a task of several asks for their sum
  if (per_task > 1 && !mem.empty()) {
    size_t digits = 0;
    while (digits < mem.size() && std::isdigit(static_cast<unsigned char>(mem[digits]))) ++digits;
    if (digits == 0) {
      err << "error: slurm mem '" << mem << "' must start with a number (e.g. 4G) to be multiplied by runs_per_task\n";
      return 2;
    }
    mem = std::to_string(std::stoll(mem.substr(0, digits)) * per_task) + mem.substr(digits);
  }
  const std::string script_path = dir + "/slurm/sweep.sbatch";
  {
    std::ostringstream script;
    script << "#!/bin/bash\n"
           << "# pelab sweep " << sweep.file << ": "
           << (per_task > 1 ? fmt::format("one array task per {} runs not yet complete, side by side\n", per_task)
                            : std::string("one array task per run not yet complete\n"))
           << "#SBATCH --job-name=pelab-" << sweep.name << "\n"
           << "#SBATCH --array=" << (per_task > 1 ? fmt::format("0-{}", groups.size() - 1) : join(indices, ",")) << "\n"
           << "#SBATCH --output=" << dir << "/slurm/%A_%a.log\n"
           << "#SBATCH --cpus-per-task=" << s.cpus_per_task * per_task << "\n"
           << "#SBATCH --time=" << s.time << "\n";
    if (!s.partition.empty()) script << "#SBATCH --partition=" << s.partition << "\n";
    if (!mem.empty()) script << "#SBATCH --mem=" << mem << "\n";
    if (s.gpus > 0) script << "#SBATCH --gres=gpu:" << s.gpus << "\n";
    // Slurm's preemption and the warning 120 s before the time limit (--signal) reach the
    // batch shell, which passes them to pelab: the run checkpoints and exits with 75, and the
    // task requeues itself; the next attempt resumes from the checkpoint.
    script << "#SBATCH --requeue\n"
           << "#SBATCH --open-mode=append\n"
           << "#SBATCH --signal=B:TERM@120\n"
           << "cd " << quoted(fs::current_path().string()) << "\n"
           << "stopping=\n"
           << "trap 'stopping=1; kill -TERM \"$pelab_pid\" 2>/dev/null' TERM INT\n";
    std::string forwarded;  // the command line's --set and --output
    for (const auto& arg : forwarded_arguments(a)) forwarded += " " + quoted(arg);
    if (per_task > 1)
      script << "runs=(" << join(groups, " ") << ")  # the runs of each array task\n"
             << quoted(pelab) << " sweep " << quoted(fs::absolute(sweep.file).string())
             << " --run-index \"${runs[$SLURM_ARRAY_TASK_ID]}\" --jobs " << per_task << " --threads "
             << s.cpus_per_task << forwarded << " &\n";
    else
      script << quoted(pelab) << " sweep " << quoted(fs::absolute(sweep.file).string())
             << " --run-index \"$SLURM_ARRAY_TASK_ID\" --threads \"${SLURM_CPUS_PER_TASK:-1}\"" << forwarded << " &\n";
    script
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
  const size_t tasks = per_task > 1 ? groups.size() : todo.size();
  out << fmt::format("wrote {} ({} array tasks: {} runs not complete of {}{})\n", script_path, tasks, todo.size(),
                     runs.size(), per_task > 1 ? fmt::format(", {} per task", per_task) : std::string());
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
                     job, tasks, job, dir, job, sweep.output);
  return 0;
}

}  // namespace

std::vector<SweepDirectoryRun> sweep_directory_runs(const std::string& sweep_dir) {
  return directory_runs(sweep_dir, read_manifest(sweep_dir));
}

void update_sweep_index(const std::string& sweep_dir, const std::vector<SweepDirectoryRun>& runs) {
  write_index(sweep_dir, fs::path(sweep_dir).filename().string(), runs);
}

int command_sweep(const SweepArguments& a, const std::string& pelab, std::ostream& out, std::ostream& err) {
  SweepConfig sweep;
  std::vector<SweepRun> runs;
  std::vector<bool> chosen;  // --only
  if ((!a.only.empty() || !a.skip_runs_in.empty()) && !a.run_indices.empty()) {
    err << "error: --only or --skip-runs-in with --run-index: give one (--run-index names runs by index)\n";
    return 2;
  }
  try {
    sweep = load_sweep_config(a.sweep_path);
    for (const auto& entry : a.set) {  // --set: after the file's own (a key given twice: the last wins)
      const auto eq = entry.find('=');
      if (eq == std::string::npos || eq == 0)
        throw ConfigError("--set " + entry + ": expected KEY=VALUE, e.g. --set train.steps=100");
      sweep.fixed.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
    if (!a.output.empty()) sweep.output = a.output;
    runs = expand_sweep(sweep, scheme_catalog(), task_catalog());
    chosen = runs_chosen(runs, a.only);
    if (!a.skip_runs_in.empty()) {
      const auto elsewhere = runs_held_by(a.skip_runs_in, sweep, runs, chosen);
      for (const auto& run : runs) chosen[run.index] = chosen[run.index] && !elsewhere.count(run.id);
    }
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  for (int64_t index : a.run_indices)
    if (index >= static_cast<int64_t>(runs.size())) {
      err << fmt::format("error: --run-index {} is out of range: the sweep has {} runs\n", index, runs.size());
      return 2;
    }
  if (!a.gpus.empty() && a.jobs_set) {
    err << "error: --jobs and --gpus: with --gpus the runs at once are the GPUs x --runs-per-gpu\n";
    return 2;
  }
  std::vector<int64_t> todo;
  int64_t complete = 0, failed_before = 0, resumable = 0, outdated = 0;
  std::map<int64_t, std::vector<std::string>> changed;  // complete runs trained with another config
  const int64_t chosen_count = std::count(chosen.begin(), chosen.end(), true);
  for (const auto& run : runs) {
    if (!chosen[run.index]) continue;
    const RunState state = state_of(run.dir);
    // compared here, not again in the packed processes and Slurm tasks (--run-index) this
    // sweep or its submission starts: each would read every complete run's file
    if (state == RunState::Complete && a.run_indices.empty()) {
      try {
        if (auto differences = trained_otherwise(sweep, run); !differences.empty()) changed[run.index] = differences;
      } catch (const std::exception& e) {
        err << "error: " << e.what() << "\n";
        return 1;
      }
    }
    if (state == RunState::Complete) ++complete;
    else if (state == RunState::Outdated) ++outdated;  // never trained over: its results stay
    else todo.push_back(run.index);
    if (state == RunState::Complete && !a.dry_run) remove_leftovers(run.dir);
    if (state == RunState::Failed) ++failed_before;
    if (state == RunState::Resumable) ++resumable;
  }
  // complete runs trained with another config: a sweep does not mix them with its own
  std::string changed_error;
  if (!changed.empty())
    changed_error = fmt::format("error: {} complete run(s) in {} were trained with another config than this sweep "
                                "gives them, e.g. {} ({}); a sweep does not mix them: give another --output, or "
                                "move their runs/<id>/ folders away to train them again{}\n",
                                changed.size(), sweep.output, runs[changed.begin()->first].id,
                                join(changed.begin()->second, "; "), a.dry_run ? "" : " (--dry-run lists them)");
  if (a.dry_run) {
    out << fmt::format("sweep '{}': {} runs ({} complete), base {}, in {}\n", sweep.name,
                       only_text(runs.size(), chosen_count), complete, sweep.base, sweep.output);
    for (const auto& run : runs) {
      if (!chosen[run.index]) continue;
      const RunState state = state_of(run.dir);
      const auto differs = changed.find(run.index);
      out << fmt::format("  {:>4}  {:<9} {}  [{}]{}\n", run.index, differs != changed.end() ? "changed" : state_name(state),
                         run.id, join(run.overrides, " "),
                         differs != changed.end() ? "  trained with " + join(differs->second, "; ") : std::string());
    }
    err << changed_error;
    if (a.slurm)
      out << "--dry-run with --slurm: no script written, nothing submitted; --slurm --no-submit writes the "
             "job array's script without submitting it\n";
    return changed.empty() ? 0 : 1;  // 1: the sweep itself would refuse
  }
  if (!changed.empty()) {
    err << changed_error;
    return 2;
  }
  // Not on a dry run, which writes nothing, nor in a Slurm array task (--run-index): the
  // submission wrote it, and the tasks run side by side (their writes would race on one
  // temporary file).
  const bool array_task = !a.run_indices.empty();
  try {
    if (!array_task) write_manifest(sweep.output, runs);
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
  if (array_task) {
    todo.clear();
    for (int64_t index : a.run_indices) {
      const RunState state = state_of(runs[index].dir);
      if (state != RunState::Complete && state != RunState::Outdated) todo.push_back(index);
    }
  }
  if (a.in_process) {
    if (!array_task) {
      err << "error: --in-process trains the runs --run-index names\n";
      return 2;
    }
    return train_in_process(sweep, runs, todo, threads_per_child(a.threads, std::max<size_t>(1, todo.size())), out);
  }
  if (outdated > 0)
    err << fmt::format("warning: {} run(s) hold a run file of another pelab (its schema version; `pelab sweep "
                       "--dry-run` lists them as outdated): left as they are; move their runs/<id>/run.h5 away to "
                       "train them again\n", outdated);

  // the slots processes go to: with --gpus, enough per GPU for runs_per_gpu runs, the GPUs
  // taken in turn so that fewer processes than slots spread over every GPU. Each process
  // trains up to runs_per_process runs (1: `pelab train` per run; more: the packed runner).
  const int64_t per_process =
      a.runs_per_process > 0 ? a.runs_per_process : (a.gpus.empty() ? 1 : a.runs_per_gpu);
  std::vector<std::string> slots;
  const int64_t processes_per_gpu = (a.runs_per_gpu + per_process - 1) / per_process;
  for (int64_t k = 0; k < processes_per_gpu; ++k)
    for (int64_t gpu : a.gpus) slots.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(gpu));
  if (a.gpus.empty()) slots.assign(std::max<int64_t>(1, a.jobs), "");
  // fewer runs than the slots hold: smaller groups, so that every slot gets some
  const int64_t todo_count = std::max<int64_t>(1, todo.size());
  const int64_t group_size = std::min<int64_t>(per_process, (todo_count + slots.size() - 1) / slots.size());
  std::vector<std::vector<int64_t>> groups;
  for (size_t first = 0; first < todo.size(); first += group_size)
    groups.emplace_back(todo.begin() + first, todo.begin() + std::min<size_t>(todo.size(), first + group_size));
  if (static_cast<int64_t>(slots.size()) > std::max<int64_t>(1, groups.size())) slots.resize(std::max<size_t>(1, groups.size()));
  const int64_t at_once = std::min<int64_t>(todo_count, static_cast<int64_t>(slots.size()) * group_size);
  const int64_t threads = threads_per_child(a.threads, at_once);
  std::vector<std::string> gpu_names;
  for (int64_t gpu : a.gpus) gpu_names.push_back(std::to_string(gpu));
  out << fmt::format("sweep '{}': {} runs, {} complete, {} to run{}{}; {} at a time x {} threads{}{}; in {}\n", sweep.name,
                     only_text(runs.size(), chosen_count), complete, todo.size(),
                     resumable ? fmt::format(" ({} resumed from checkpoints)", resumable) : std::string(),
                     failed_before ? fmt::format(" ({} failed before: retried)", failed_before) : std::string(), at_once,
                     threads,
                     a.gpus.empty() ? std::string()
                                    : fmt::format(" on GPUs {} ({} per GPU)", join(gpu_names), a.runs_per_gpu),
                     group_size > 1 ? fmt::format(", up to {} runs per process", group_size) : std::string(),
                     sweep.output);
  out.flush();
  // SIGINT/SIGTERM (handlers installed by main): start nothing more, pass the signal on to
  // the processes (their runs checkpoint and exit with kExitInterrupted), wait for them, and
  // exit with kExitInterrupted too.
  std::vector<ChildProcess> processes;
  for (const auto& group : groups) {
    if (group.size() == 1) processes.push_back(train_process(pelab, sweep, runs[group[0]], threads));
    else
      processes.push_back(packed_process(pelab, sweep, a, group, threads,
                                         sweep.output + "/processes/" + runs[group[0]].id + ".log"));
  }
  int64_t done = 0, failed = 0, interrupted = 0, running = 0;
  // per process: when it started (running ones), and the seconds of those that ended, for the
  // estimate of the time left
  std::map<size_t, std::chrono::steady_clock::time_point> process_started;
  double ended_seconds = 0;
  int64_t ended_processes = 0;
  auto placed = [&](size_t slot) {  // " on GPU 1" with --gpus
    return a.gpus.empty() ? std::string() : " on GPU " + slots[slot].substr(slots[slot].find('=') + 1);
  };
  // the sweep's progress after a run ends: what runs, what is left, and an estimate of the time
  // left from the processes finished so far
  auto progress = [&] {
    const int64_t finished = done + failed, left = static_cast<int64_t>(todo.size()) - finished - interrupted;
    std::string eta;
    if (ended_processes > 0 && left > 0) {
      const auto now = std::chrono::steady_clock::now();
      std::vector<double> ages;
      for (const auto& [index, start] : process_started) ages.push_back(std::chrono::duration<double>(now - start).count());
      const int64_t not_started = static_cast<int64_t>(processes.size()) - ended_processes - static_cast<int64_t>(ages.size());
      const int64_t seconds = std::llround(sweep_seconds_left(ended_seconds / ended_processes, not_started, ages,
                                                              static_cast<int64_t>(slots.size())));
      eta = seconds >= 60 ? fmt::format(", about {}m{:02d}s left", seconds / 60, seconds % 60)
                          : fmt::format(", about {}s left", seconds);
    }
    return fmt::format("; {} running, {} to start{}", running, std::max<int64_t>(0, left - running), eta);
  };
  const size_t not_started = run_child_processes(
      processes, slots,
      [&](size_t i) {
        if (groups[i].size() > 1) fs::create_directories(sweep.output + "/processes");
        std::vector<std::string> ids;
        for (int64_t index : groups[i]) {
          const SweepRun& run = runs[index];
          fs::create_directories(run.dir);
          fs::remove(run.dir + "/" + kFailedFile);
          remove_leftovers(run.dir);
          ids.push_back(run.id);
        }
        running += static_cast<int64_t>(groups[i].size());
        process_started[i] = std::chrono::steady_clock::now();
        out << fmt::format("[-/{}] started   {}\n", todo.size(), join(ids));
        out.flush();
      },
      [&](const ChildEnd& end) {
        running -= static_cast<int64_t>(groups[end.index].size());
        process_started.erase(end.index);
        ended_seconds += end.seconds;
        ++ended_processes;
        for (int64_t index : groups[end.index]) {
          const SweepRun& run = runs[index];
          std::string error;
          // a packed process's runs: each one's own state first (complete, or failed.txt it wrote)
          const bool packed = groups[end.index].size() > 1;
          RunEnd outcome;
          if (packed && is_complete_run_file(run_file_of(run))) outcome = RunEnd::Complete;
          else if (packed && fs::exists(run.dir + "/" + kFailedFile)) {
            outcome = RunEnd::Failed;
            error = read_text(run.dir + "/" + kFailedFile);
            while (!error.empty() && error.back() == '\n') error.pop_back();
            if (error.rfind("error: ", 0) == 0) error = error.substr(7);
          } else {
            outcome = finish_run(run, end.status, end.log_offset, error,
                                 packed ? processes[end.index].log_file : run.dir + "/" + kLogFile);
          }
          switch (outcome) {
            case RunEnd::Complete:
              ++done;
              out << fmt::format("[{}/{}] complete  {} ({:.0f}s{}){}\n", done + failed, todo.size(), run.id,
                                 end.seconds, placed(end.slot), progress());
              break;
            case RunEnd::Interrupted:
              ++interrupted;
              out << fmt::format("[-/{}] stopped   {} ({:.0f}s): checkpointed, resumed by the next sweep\n",
                                 todo.size(), run.id, end.seconds);
              break;
            case RunEnd::Failed:
              ++failed;
              out << fmt::format("[{}/{}] FAILED    {} ({:.0f}s{}): {}{}\n", done + failed, todo.size(), run.id,
                                 end.seconds, placed(end.slot), error, progress());
              break;
          }
        }
      },
      group_size > 1 ? "process(es) of up to " + std::to_string(group_size) +
                           " runs at their next step (they write checkpoints)"
                     : std::string("run(s) at their next step (they write checkpoints)"),
      out);
  std::vector<ManifestRow> rows;
  for (const auto& r : runs) rows.push_back({r.index, r.id, join(r.overrides, " ")});
  if (!array_task) {
    write_index(sweep.output, sweep.name, directory_runs(sweep.output, rows));
    out << fmt::format("{} of {} runs complete{}; index {}/{}; table: pelab report {}\n", complete + done, runs.size(),
                       failed ? fmt::format(", {} failed (runs/<id>/failed.txt, log.txt)", failed) : std::string(),
                       sweep.output, schema::kSweepIndexFileName, sweep.output);
  }
  if (stop_signal() != 0) {
    out << fmt::format("stopped by {}: {} run(s) checkpointed, {} not started; the same command resumes the sweep\n",
                       signal_name(stop_signal()), interrupted, not_started);
    return kExitInterrupted;
  }
  if (interrupted > 0) return kExitInterrupted;  // runs stopped by signals sent to them alone
  return failed ? 1 : 0;
}

}  // namespace pelab
