#include "core/io/safetensors.h"

#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

namespace pelab {

namespace {

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

torch::ScalarType safetensors_dtype(const std::string& name, const std::string& path, const std::string& tensor) {
  static const std::map<std::string, torch::ScalarType> dtypes = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},   {"I8", torch::kInt8},
      {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};
  const auto found = dtypes.find(name);
  if (found == dtypes.end())
    throw std::runtime_error(fmt::format("{}: tensor {} has dtype {}, which pelab does not read", path, tensor, name));
  return found->second;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  const auto fail = [&](const std::string& why) { throw std::runtime_error(path + ": not a safetensors file (" + why + ")"); };
  if (bytes.size() < 8) fail("shorter than its header size");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_size > bytes.size() - 8) fail("its header size is past the end of the file");
  const size_t data_start = 8 + header_size;
  YAML::Node header;
  try {
    header = YAML::Load(std::string(bytes.data() + 8, header_size));  // JSON is YAML
  } catch (const YAML::Exception& e) {
    fail(std::string("header: ") + e.what());
  }
  if (!header.IsMap()) fail("the header is not a JSON object");
  NamedTensors out;
  for (const auto& entry : header) {
    const std::string name = entry.first.as<std::string>();
    if (name == "__metadata__") continue;
    const YAML::Node& info = entry.second;
    if (!info["dtype"] || !info["shape"] || !info["data_offsets"] || info["data_offsets"].size() != 2)
      fail("tensor " + name + " lacks dtype, shape or data_offsets");
    const torch::ScalarType dtype = safetensors_dtype(info["dtype"].as<std::string>(), path, name);
    std::vector<int64_t> shape;
    for (const auto& d : info["shape"]) shape.push_back(d.as<int64_t>());
    const auto begin = info["data_offsets"][0].as<uint64_t>(), end = info["data_offsets"][1].as<uint64_t>();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (end < begin || end > bytes.size() - data_start ||
        end - begin != static_cast<uint64_t>(numel) * c10::elementSize(dtype))
      fail(fmt::format("tensor {}: data_offsets [{}, {}] do not hold {} values of its dtype", name, begin, end, numel));
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
    if (numel > 0) std::memcpy(t.data_ptr(), bytes.data() + data_start + begin, end - begin);  // x86: little-endian
    out.emplace_back(name, t);
  }
  return out;
}

NamedTensors read_torch_state_dict(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw std::runtime_error(path + ": not a torch.save zip file (" + what.substr(0, what.find('\n')) + ")");
  }
  if (!value.isGenericDict()) throw std::runtime_error(path + ": holds no state dict (a dict of tensors)");
  NamedTensors out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::runtime_error(path + ": holds something other than named tensors");
    out.emplace_back(item.key().toStringRef(), item.value().toTensor().contiguous());
  }
  return out;
}

}  // namespace pelab
