// Reading the tensor files of HF checkpoints: safetensors (huggingface/safetensors: an 8-byte
// little-endian header size, a JSON header of name -> dtype, shape, data_offsets, then the
// raw little-endian data) and PyTorch's torch.save zip files (pytorch_model.bin).
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace pelab {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Every tensor of a .safetensors file, in the header's order, on the CPU (F64, F32, F16, BF16,
// I64, I32, I16, I8, U8, BOOL). std::runtime_error naming the file on a malformed header, a
// dtype pelab does not read, or data outside the file.
NamedTensors read_safetensors(const std::string& path);

// Every tensor of a state dict saved by torch.save (the zip format of PyTorch >= 1.6).
// std::runtime_error naming the file when it is not a dict of tensors.
NamedTensors read_torch_state_dict(const std::string& path);

}  // namespace pelab
