#include "core/kernels/cpu_features.h"

namespace pelab {

VectorInstructions widest_vector_instructions() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return VectorInstructions::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorInstructions::avx2_fma;
  if (__builtin_cpu_supports("avx")) return VectorInstructions::avx;
#endif
  return VectorInstructions::baseline;
}

}  // namespace pelab
