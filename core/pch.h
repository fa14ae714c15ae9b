// Precompiled header of pelab_core: LibTorch dominates compile time on small machines.
#pragma once
#include <torch/torch.h>
