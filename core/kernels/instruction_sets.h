// Which copy of pelab's CPU kernels runs (attention.h, gelu.h, layer_norm.h): each is
// compiled for AVX-512, AVX2 + FMA and baseline x86-64, and the widest one this CPU
// supports is used unless the environment variable PELAB_CPU_KERNELS names a narrower one
// (as if the CPU ran no wider) or a caller (the tests, which run every copy) picks another.
// Torch-free.
#pragma once

#include <string>
#include <vector>

namespace pelab::kernels {

// The instruction sets whose copy of the kernels this CPU can run, widest last, from
// "baseline", "avx2", "avx512" (up to PELAB_CPU_KERNELS's when set); the one in use (by
// default the widest); and a switch to another one. use_instruction_set throws
// std::invalid_argument for a set this CPU cannot run; every function here throws it, naming
// the variable, when PELAB_CPU_KERNELS names an unknown set or one wider than the CPU's.
std::vector<std::string> supported_instruction_sets();
std::string instruction_set_in_use();
void use_instruction_set(const std::string& name);

// For the kernels' dispatch.
enum class InstructionSet { baseline, avx2, avx512 };
InstructionSet instruction_set();

}  // namespace pelab::kernels
