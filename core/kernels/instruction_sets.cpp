#include "core/kernels/instruction_sets.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "core/kernels/cpu_features.h"

namespace pelab::kernels {

namespace {

const char* const kInstructionSetNames[] = {"baseline", "avx2", "avx512"};

InstructionSet widest_on_this_cpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (widest_vector_instructions()) {
    case VectorInstructions::avx512: return InstructionSet::avx512;
    case VectorInstructions::avx2_fma: return InstructionSet::avx2;
    case VectorInstructions::avx:
    case VectorInstructions::baseline: break;
  }
#endif
  return InstructionSet::baseline;
}

// The CPU's widest, or PELAB_CPU_KERNELS's choice when set (a narrower copy: a CPU without
// AVX-512, say, or the same float rounding as another machine).
InstructionSet best_instruction_set() {
  const int widest = static_cast<int>(widest_on_this_cpu());
  const char* requested = std::getenv("PELAB_CPU_KERNELS");
  if (!requested || !*requested) return static_cast<InstructionSet>(widest);
  std::string runnable;
  for (int i = 0; i <= widest; ++i) {
    if (kInstructionSetNames[i] == std::string(requested)) return static_cast<InstructionSet>(i);
    runnable += std::string(i ? ", " : "") + kInstructionSetNames[i];
  }
  throw std::invalid_argument(std::string("PELAB_CPU_KERNELS=") + requested + ": this CPU runs pelab's " + runnable +
                              " CPU kernels");
}

std::atomic<int>& chosen_instruction_set() {
  static std::atomic<int> chosen{static_cast<int>(best_instruction_set())};
  return chosen;
}

}  // namespace

InstructionSet instruction_set() { return static_cast<InstructionSet>(chosen_instruction_set().load()); }

std::vector<std::string> supported_instruction_sets() {
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(best_instruction_set()); ++i) names.push_back(kInstructionSetNames[i]);
  return names;
}

std::string instruction_set_in_use() { return kInstructionSetNames[static_cast<int>(instruction_set())]; }

void use_instruction_set(const std::string& name) {
  const auto supported = supported_instruction_sets();
  for (size_t i = 0; i < supported.size(); ++i)
    if (supported[i] == name) {
      chosen_instruction_set() = static_cast<int>(i);
      return;
    }
  throw std::invalid_argument("this CPU cannot run the '" + name + "' CPU kernels");
}

}  // namespace pelab::kernels
