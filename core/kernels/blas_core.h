// OpenBLAS picks its kernels by CPU model when it loads. OpenBLAS 0.3.21 (Debian 12) does
// not know recent Xeons (Sapphire Rapids) and falls back to its SSE3 "Prescott" kernels, a
// fraction of the speed of the AVX-512 "SkylakeX" kernels the CPU supports
// (docs/performance.md).
// OPENBLAS_CORETYPE chooses the kernels, but is read only when the library loads, so
// pelab re-executes itself with it set before doing anything else. Torch-free.
#pragma once

#include <string>

namespace pelab {

// The loaded OpenBLAS's kernel family ("Prescott", "Haswell", "SkylakeX", ...), or "" when
// the BLAS is not OpenBLAS.
std::string openblas_core();

// The OPENBLAS_CORETYPE this CPU supports that is better than `current` (by instruction
// set: AVX-512 -> SkylakeX, AVX2 + FMA -> Haswell, AVX -> Sandybridge), or "" when
// `current` is as good or unknown.
std::string better_openblas_core(const std::string& current);

// Called first in main(): when OpenBLAS runs kernels below what the CPU supports and
// OPENBLAS_CORETYPE is not set (a user's choice is kept), sets it and re-executes this
// program with the same arguments. Returns (does nothing) otherwise or if exec fails.
void reexec_with_best_openblas_core(char** argv);

}  // namespace pelab
