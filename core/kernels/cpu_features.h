// What x86 vector instructions this CPU has, read by feature (cpuid), not by CPU model:
// OpenBLAS's kernel choice (core/kernels/blas_core.h) and the fused attention kernels' copies
// (core/kernels/attention.h) both pick by it. Torch-free.
#pragma once

namespace pelab {

// Ordered: each level includes the ones before it.
enum class VectorInstructions {
  baseline,  // x86-64 (SSE2), or not an x86 CPU
  avx,
  avx2_fma,  // AVX2 and FMA
  avx512,    // AVX-512 F, VL, BW and DQ
};

VectorInstructions widest_vector_instructions();

}  // namespace pelab
