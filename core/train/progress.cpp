#include "core/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace pelab {

double sweep_seconds_left(double mean_seconds, int64_t not_started, const std::vector<double>& running_ages,
                          int64_t slots) {
  double work = mean_seconds * static_cast<double>(not_started);
  // a bound: the running process furthest from its end, or a whole process still to start
  double longest = not_started > 0 ? mean_seconds : 0.0;
  for (double age : running_ages) {
    work += std::max(0.0, mean_seconds - age);
    longest = std::max(longest, mean_seconds - age);
  }
  const int64_t active = std::min<int64_t>(std::max<int64_t>(1, slots), not_started + static_cast<int64_t>(running_ages.size()));
  if (active == 0) return 0;
  return std::max(longest, work / static_cast<double>(active));
}

ProgressReporter::ProgressReporter(std::ostream& out, int64_t total_steps, int64_t log_every,
                                   bool interactive)
    : out_(out), total_(total_steps), log_every_(log_every), interactive_(interactive),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

bool ProgressReporter::stdout_is_terminal() { return isatty(STDOUT_FILENO) == 1; }

void ProgressReporter::update(const ProgressStats& s) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = s.step > 0 ? elapsed / s.step * (total_ - s.step) : 0.0;
  const std::string numbers =
      fmt::format("step {:>{}}/{}{} | loss {:.4f} | acc {:6.2f}% | lr {:.2e} | {:.0f} tok/s | {:.0f}s, eta {:.0f}s",
                  s.step, std::to_string(total_).size(), total_, s.phase.empty() ? "" : " | " + s.phase, s.loss, 100.0 * s.accuracy,
                  s.learning_rate, s.tokens_per_second, elapsed, eta);
  if (interactive_) {
    // Redraw at most 10 times a second, and always at the last step.
    if (s.step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const int width = 24;
    const int filled = static_cast<int>(width * s.step / std::max<int64_t>(1, total_));
    out_ << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << numbers
         << "\x1b[K" << std::flush;
    drawn_ = true;
  } else if (s.step % log_every_ == 0 || s.step == total_ || s.step == 1) {
    out_ << numbers << '\n' << std::flush;
  }
}

void ProgressReporter::finish() {
  if (interactive_ && drawn_) out_ << '\n' << std::flush;
  drawn_ = false;
}

}  // namespace pelab
