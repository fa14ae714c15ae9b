#include "core/blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace pelab {

namespace {

// Kernel families by the instruction set they use (OpenBLAS's names); higher is wider.
int rank_of(const std::string& core) {
  static const std::map<std::string, int> ranks = {
      {"Prescott", 1}, {"Core2", 1}, {"Penryn", 1}, {"Dunnington", 1}, {"Nehalem", 1}, {"Atom", 1},
      {"Barcelona", 1}, {"Bobcat", 1}, {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2},
      {"Steamroller", 2}, {"Excavator", 2}, {"Haswell", 3}, {"Zen", 3}, {"SkylakeX", 4}, {"Cooperlake", 4},
      {"SapphireRapids", 4}};
  const auto it = ranks.find(core);
  return it == ranks.end() ? 0 : it->second;
}

}  // namespace

std::string openblas_core() {
  using CoreName = const char* (*)();
  auto get = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = get ? get() : nullptr;
  return name ? std::string(name) : std::string();
}

std::string better_openblas_core(const std::string& current) {
  const int have = rank_of(current);
  if (have == 0) return "";  // not OpenBLAS, or a family this table does not know: keep it
  std::string best;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    best = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    best = "Haswell";
  else if (__builtin_cpu_supports("avx"))
    best = "Sandybridge";
#endif
  return rank_of(best) > have ? best : "";
}

void reexec_with_best_openblas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // chosen by the user (or by the exec below)
  const std::string better = better_openblas_core(openblas_core());
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: go on with the kernels loaded
}

}  // namespace pelab
