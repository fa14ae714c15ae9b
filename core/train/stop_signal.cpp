#include "core/train/stop_signal.h"

#include <csignal>

namespace pelab {

namespace {

volatile std::sig_atomic_t requested_signal = 0;

extern "C" void on_stop_signal(int signal) {
  if (requested_signal == 0) requested_signal = signal;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a sweep runner's waitpid returns EINTR and looks at the flag
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return requested_signal; }

void clear_stop_request() { requested_signal = 0; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

RunInterrupted::RunInterrupted(int signal_, int64_t step_, std::string checkpoint_)
    : std::runtime_error("stopped by " + signal_name(signal_) + " after step " + std::to_string(step_) +
                         (checkpoint_.empty() ? std::string(" (no checkpoint written)")
                                              : "; checkpoint " + checkpoint_)),
      signal(signal_),
      step(step_),
      checkpoint(std::move(checkpoint_)) {}

}  // namespace pelab
