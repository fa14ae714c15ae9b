// Training progress: a redrawn bar on a terminal, a plain line every `log_every` steps
// otherwise (CI, Slurm logs, pipes). Torch-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pelab {

struct ProgressStats {
  int64_t step = 0;            // steps done (1-based)
  double loss = 0;
  double accuracy = 0;         // per-token accuracy on the training batch
  double tokens_per_second = 0;
  double learning_rate = 0;
  std::string phase;           // e.g. "phase 2/2 (lengths 1-512)" with train.phases, else empty
};

// Seconds a sweep has left: the processes not started and the rest of the running ones
// (`running_ages`: seconds since each started) at `mean_seconds` each, the time the finished
// ones took, `slots` processes at a time.
double sweep_seconds_left(double mean_seconds, int64_t not_started, const std::vector<double>& running_ages,
                          int64_t slots);

class ProgressReporter {
 public:
  // `interactive`: redraw one line; otherwise print a line every `log_every` steps.
  ProgressReporter(std::ostream& out, int64_t total_steps, int64_t log_every, bool interactive);
  static bool stdout_is_terminal();

  void update(const ProgressStats& stats);
  void finish();

 private:
  std::ostream& out_;
  int64_t total_, log_every_;
  bool interactive_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pelab
