// Which OpenBLAS kernels pelab asks for (core/kernels/blas_core.h): by the CPU's instruction sets,
// only ever wider than the ones loaded, and never for a library or family it does not know.
// Torch-free.
#include "tests/catch.h"

#include <string>

#include "core/kernels/blas_core.h"
#include "core/kernels/cpu_features.h"

using namespace pelab;

CATCH_TEST_CASE("better_openblas_core: the widest kernels this CPU runs, only when wider than the loaded ones",
                "[blas]") {
  std::string widest;  // what this CPU supports, by feature
  switch (widest_vector_instructions()) {
    case VectorInstructions::avx512: widest = "SkylakeX"; break;
    case VectorInstructions::avx2_fma: widest = "Haswell"; break;
    case VectorInstructions::avx: widest = "Sandybridge"; break;
    case VectorInstructions::baseline: break;
  }
  CATCH_CAPTURE(widest);
  // SSE-only kernels (OpenBLAS's fallback for a CPU it does not know): any wider set is better
  for (const char* sse_family : {"Prescott", "Nehalem", "Barcelona"}) CATCH_CHECK(better_openblas_core(sse_family) == widest);
  // the widest families are never replaced; neither is what this CPU already runs at its width
  for (const char* widest_family : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    CATCH_CHECK(better_openblas_core(widest_family).empty());
  CATCH_CHECK(better_openblas_core("Haswell") == (widest == "SkylakeX" ? "SkylakeX" : ""));
  CATCH_CHECK(better_openblas_core("Zen") == (widest == "SkylakeX" ? "SkylakeX" : ""));
  // not OpenBLAS (""), or a family the table does not rank: kept as it is
  CATCH_CHECK(better_openblas_core("").empty());
  CATCH_CHECK(better_openblas_core("SomeFutureCore").empty());
}
