#include "core/encodings/none.h"

namespace pelab {

std::string NoPositionEncodingImpl::description() {
  return "NoPE: no position information (Kazemnejad et al. 2023); causal masking alone carries order";
}

}  // namespace pelab
