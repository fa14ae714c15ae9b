#include "experiments/child_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/train/stop_signal.h"

extern char** environ;

namespace pelab {

namespace {

// `assignment`: "NAME=value" added to (or replacing NAME in) this process's environment.
pid_t start_child(const ChildProcess& child, const std::string& assignment) {
  std::vector<std::string> args = child.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> variables;
  const std::string name = assignment.substr(0, assignment.find('=') + 1);  // "NAME=" or ""
  for (char** e = environ; *e; ++e)
    if (name.empty() || std::string(*e).rfind(name, 0) != 0) variables.emplace_back(*e);
  if (!assignment.empty()) variables.push_back(assignment);
  std::vector<char*> envp;
  for (auto& v : variables) envp.push_back(v.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, child.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

struct Running {
  size_t index, slot;
  std::chrono::steady_clock::time_point start;
  std::uintmax_t log_offset;
};

}  // namespace

size_t run_child_processes(const std::vector<ChildProcess>& children, const std::vector<std::string>& slots,
                           const std::function<void(size_t)>& before_start,
                           const std::function<void(const ChildEnd&)>& on_end, const std::string& stopping_what,
                           std::ostream& out) {
  // The loop polls (waitpid WNOHANG, 50 ms naps) so that a signal is seen within 50 ms
  // whenever it lands.
  std::map<pid_t, Running> running;
  std::vector<bool> busy(slots.size(), false);
  size_t next = 0;
  bool forwarded = false;
  while ((next < children.size() && stop_signal() == 0) || !running.empty()) {
    while (next < children.size() && stop_signal() == 0 && running.size() < slots.size()) {
      const size_t index = next++, slot = std::find(busy.begin(), busy.end(), false) - busy.begin();
      if (before_start) before_start(index);
      std::error_code no_log;
      const auto log_offset = std::filesystem::file_size(children[index].log_file, no_log);
      running[start_child(children[index], slots[slot])] = {index, slot, std::chrono::steady_clock::now(),
                                                            no_log ? 0 : log_offset};
      busy[slot] = true;
    }
    if (stop_signal() != 0 && !forwarded) {
      for (const auto& [child, entry] : running) kill(child, stop_signal());
      forwarded = true;
      out << fmt::format("{}: stopping {} {}\n", signal_name(stop_signal()), running.size(), stopping_what);
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
    const Running ended = it->second;
    running.erase(it);
    busy[ended.slot] = false;
    on_end({ended.index, ended.slot, status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - ended.start).count(), ended.log_offset});
    out.flush();
  }
  return children.size() - next;
}

std::string child_error_line(const std::string& log_file, int status, std::uintmax_t from) {
  std::ifstream in(log_file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::istringstream log(from < all.size() ? all.substr(from) : std::string());
  std::string line, error;
  while (std::getline(log, line))
    if (line.rfind("error:", 0) == 0) error = line;
  if (!error.empty()) return error;
  if (WIFSIGNALED(status)) return fmt::format("error: killed by signal {}", WTERMSIG(status));
  return fmt::format("error: exit status {} (see {})", WIFEXITED(status) ? WEXITSTATUS(status) : -1, log_file);
}

int64_t threads_per_child(int64_t requested, int64_t jobs) {
  if (requested > 0) return requested;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<int64_t>(1, cores / std::max<int64_t>(1, jobs));
}

}  // namespace pelab
