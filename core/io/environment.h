// What a run ran on: versions, commit, device, threads, host.
#pragma once

#include <string>

namespace pelab {

struct Environment {
  std::string pelab_version, git_commit, torch_version, device, hostname, created_utc;
  std::string cpu_kernels;  // the copy of pelab's CPU kernels in use ("avx512", ...; "" in older files)
  int64_t threads = 0;
};

// The current process's environment; `device` as resolved for the run ("cpu", "cuda:0").
Environment current_environment(const std::string& device);

}  // namespace pelab
