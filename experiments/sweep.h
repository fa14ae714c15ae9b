// `pelab sweep`: local worker processes, or a Slurm job array (`pelab report`: report.h).
//
// A sweep directory holds runs/<id>/{log.txt, run.h5 | failed.txt}, the
// manifest runs.tsv (index, id, axis overrides), the index sweep.h5 and, after a report,
// report.csv and report.md. A run is complete when its run.h5 is (run files are written
// under a temporary name and renamed), so an interrupted sweep restarted with the same
// command redoes exactly the runs that are not complete.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/config/sweep_config.h"

namespace pelab {

struct SweepArguments {
  std::string sweep_path;
  int64_t jobs = 1;          // runs at once (local)
  bool jobs_set = false;     // --jobs given (refused beside --gpus)
  std::vector<int64_t> gpus;  // place runs on these GPUs (CUDA_VISIBLE_DEVICES per run), runs_per_gpu
  int64_t runs_per_gpu = 1;   //   on each at once: runs at once = gpus x runs_per_gpu
  bool runs_per_gpu_auto = false;  // --runs-per-gpu auto: kAutoRunsPerGpu, packed in one process per GPU
  int64_t runs_per_process = 0;    // runs trained in one child process, each on its own thread
                                   //   (0: 1, or runs_per_gpu with --gpus: one process per GPU)
  bool in_process = false;   // internal: train the --run-index runs in this process (a packed child)
  std::vector<std::string> set;  // --set KEY=VALUE: added to the sweep file's `set` (after it: wins)
  std::string output;            // --output DIR: instead of the sweep file's `output`
  int64_t threads = 0;       // threads per run; 0: cores / jobs (at least 1)
  bool dry_run = false;      // list the runs and their state, run nothing
  std::vector<int64_t> run_indices;  // run only these runs, side by side (a Slurm array task)
  std::vector<std::string> only;     // --only KEY=VALUE: only the runs with these axis values (a key
                                     //   given again: any of its values); the folder keeps every run
  std::string skip_runs_in;          // --skip-runs-in FILE: runs a per-run file (report_runs.csv)
                                     //   holds are left out, as complete elsewhere
  bool slurm = false;        // write an sbatch job array script and submit it
  bool no_submit = false;    // with slurm: only write the script
  SlurmSettings slurm_overrides;  // fields set on the command line win over the sweep file
  bool partition_set = false, time_set = false, cpus_set = false, gpus_set = false, mem_set = false,
       runs_per_task_set = false;
};

// --runs-per-gpu auto: runs packed into the one process of each GPU. Chosen on the CPU: not yet
// measured on a GPU (docs/sweeps-and-slurm.md, "Many runs in one process").
constexpr int64_t kAutoRunsPerGpu = 16;

// Exit codes: 0 every run complete (or listed, or submitted), 1 some run failed, 2 a bad sweep file.
int command_sweep(const SweepArguments& arguments, const std::string& pelab_executable, std::ostream& out,
                  std::ostream& err);

// The runs of a sweep directory, from its run list (runs.tsv), in order; throws
// std::runtime_error when `sweep_dir` has none (not a sweep directory).
struct SweepDirectoryRun {
  std::string id, overrides;  // overrides: the run's axis values, "key=value key=value"
  std::string dir;            // sweep_dir/runs/<id>
  std::string state;          // complete | failed | pending | resumable | outdated
  std::string error;          // a failed run's error line
};
std::vector<SweepDirectoryRun> sweep_directory_runs(const std::string& sweep_dir);
// Writes the sweep index (sweep.h5) of a sweep directory anew, from its runs
// (sweep_directory_runs).
void update_sweep_index(const std::string& sweep_dir, const std::vector<SweepDirectoryRun>& runs);

}  // namespace pelab
