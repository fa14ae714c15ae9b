// Child pelab processes run side by side (a sweep's runs, pelab eval over a sweep): at most
// `jobs` at once, each with its output appended to its own log file, stopped together on
// SIGINT/SIGTERM.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace pelab {

struct ChildProcess {
  std::vector<std::string> argv;  // argv[0]: the executable's path
  std::string log_file;           // stdout and stderr, appended
};

struct ChildEnd {
  size_t index;              // into the children given
  size_t slot;               // the slot it ran in
  int status;                // as waitpid reports it
  double seconds;
  std::uintmax_t log_offset; // where this process's output starts in its log file
};

// Runs `children` in order, one per slot at a time: `slots` holds, per slot, an environment
// assignment its children get ("CUDA_VISIBLE_DEVICES=1", or "" for none), and a child starts
// in the free slot that comes first. `before_start(i)` runs just before child i starts (to
// prepare its folder), `on_end` as each ends. On a stop signal (stop_signal.h; main installs
// the handlers) it starts no more, passes the signal on to those running and waits for them,
// saying so on `out` ("SIGTERM: stopping 2 " + stopping_what). Returns how many never started.
size_t run_child_processes(const std::vector<ChildProcess>& children, const std::vector<std::string>& slots,
                           const std::function<void(size_t)>& before_start,
                           const std::function<void(const ChildEnd&)>& on_end, const std::string& stopping_what,
                           std::ostream& out);

// Intra-op threads of each of `jobs` children run side by side: `requested` when set (> 0),
// else the machine's cores shared out, at least 1.
int64_t threads_per_child(int64_t requested, int64_t jobs);

// The last line starting "error:" that a child wrote to its log from `from` on, or what its
// exit status says.
std::string child_error_line(const std::string& log_file, int status, std::uintmax_t from);

}  // namespace pelab
