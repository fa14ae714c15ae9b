#include "core/kernels/blas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include "core/kernels/cpu_features.h"

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
  switch (widest_vector_instructions()) {
    case VectorInstructions::avx512: best = "SkylakeX"; break;
    case VectorInstructions::avx2_fma: best = "Haswell"; break;
    case VectorInstructions::avx: best = "Sandybridge"; break;
    case VectorInstructions::baseline: break;
  }
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
