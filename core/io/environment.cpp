#include "core/io/environment.h"

#include <torch/version.h>
#include <unistd.h>

#include <ctime>

#include "core/kernels/instruction_sets.h"
#include "pelab_version.h"

namespace pelab {

Environment current_environment(const std::string& device) {
  Environment e;
  e.pelab_version = PELAB_VERSION;
  e.git_commit = PELAB_GIT_COMMIT;
  e.torch_version = TORCH_VERSION;
  e.device = device;
  e.threads = torch::get_num_threads();
  e.cpu_kernels = kernels::instruction_set_in_use();
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) e.hostname = host;
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  e.created_utc = stamp;
  return e;
}

}  // namespace pelab
