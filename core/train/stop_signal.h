// Graceful stops: SIGINT (Ctrl-C) and SIGTERM (kill, Slurm's preemption and its time-limit
// warning) set a flag; the trainer checks it after every step, writes a checkpoint and
// throws RunInterrupted; `pelab train` then exits with kExitInterrupted. Torch-free.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace pelab {

// The exit status of a run (or sweep) stopped by a signal after writing its checkpoint:
// sysexits.h's EX_TEMPFAIL, "try again later". `--resume` continues it.
constexpr int kExitInterrupted = 75;

// Installs the SIGINT and SIGTERM handlers (idempotent). Repeated signals are harmless:
// the first one is kept.
void install_stop_handlers();
// The signal that asked for a stop (SIGINT or SIGTERM), or 0.
int stop_signal();
// Forgets a stop request (tests; a sweep runner after it has handled one).
void clear_stop_request();
// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

struct RunInterrupted : std::runtime_error {
  RunInterrupted(int signal, int64_t step, std::string checkpoint);
  int signal;
  int64_t step;            // optimizer steps done when it stopped
  std::string checkpoint;  // the checkpoint written, or empty when none was
};

}  // namespace pelab
