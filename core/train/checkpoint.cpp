#include "core/train/checkpoint.h"

#include <filesystem>

#include "core/io/hdf5_util.h"

namespace pelab {

using namespace hdf5;

namespace {

// dataset and attribute names of checkpoint.h5
constexpr const char* kVersionAttr = "checkpoint_version";
constexpr const char* kConfig = "config";
constexpr const char* kStepAttr = "step";
constexpr const char* kThreadsAttr = "threads";
constexpr const char* kCurve = "curve";      // group: the training curve rows so far
constexpr const char* kWindow = "window";    // attributes: the log_every window in progress
constexpr const char* kRng = "rng";  // group: data, positions (text), torch and, from a GPU, cuda (uint8)
constexpr const char* kModel = "model";      // group: one float32 dataset per parameter / buffer
constexpr const char* kOptimizer = "optimizer";  // group: AdamStep's state, one dataset per tensor
constexpr const char* kEvaluationCurve = "evaluation_curve";  // group: eval.every rows so far
constexpr const char* kSnapshots = "snapshots";  // group of step_<S> groups: output.keep_checkpoints
constexpr const char* kTrainedRows = "trained_rows";  // group: uint8 per position table (attributes as
                                                      //   the run file's), and gradient_seen (uint8)
constexpr const char* kGradientSeen = "gradient_seen";        // before: 1 nonzero, 0 otherwise
constexpr const char* kGradientRecord = "gradient_record";    // 0 none, 1 zero, 2 nonzero

void write_bytes(H5::Group& group, const std::string& name, const void* data, size_t size) {
  hsize_t dims[1] = {size};
  auto dataset = group.createDataSet(name, H5::PredType::NATIVE_UINT8, H5::DataSpace(1, dims));
  if (size) dataset.write(data, H5::PredType::NATIVE_UINT8);
}

std::vector<uint8_t> read_bytes(const H5::Group& group, const std::string& name) {
  H5::DataSet dataset = group.openDataSet(name);
  hsize_t dims[1] = {0};
  dataset.getSpace().getSimpleExtentDims(dims);
  std::vector<uint8_t> bytes(dims[0]);
  if (!bytes.empty()) dataset.read(bytes.data(), H5::PredType::NATIVE_UINT8);
  return bytes;
}

// bytes: (N,) uint8, a tensor of its own
torch::Tensor bytes_tensor(std::vector<uint8_t> bytes) {
  return torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8).clone();
}

}  // namespace

void write_training_checkpoint(const std::string& path, const TrainingCheckpoint& c) {
  write_hdf5_file(path, "checkpoint", [&](H5::H5File& file) {
    H5::Group root = file.openGroup("/");
    write_scalar_attribute<int64_t>(file, kVersionAttr, kCheckpointVersion);
    write_scalar_attribute<int64_t>(file, kStepAttr, c.progress.step);
    write_scalar_attribute<int64_t>(file, kThreadsAttr, c.threads);
    write_string_dataset(root, kConfig, c.config_yaml);

    const TrainerProgress& p = c.progress;
    H5::Group curve = file.createGroup(kCurve);
    write_training_curve(curve, p.curve);
    H5::Group window = file.createGroup(kWindow);
    write_scalar_attribute<double>(window, "loss", p.window_loss);
    write_scalar_attribute<double>(window, "accuracy", p.window_accuracy);
    write_scalar_attribute<double>(window, "tokens", p.window_tokens);
    write_scalar_attribute<double>(window, "seconds", p.window_seconds);
    write_scalar_attribute<int64_t>(window, "steps", p.window_steps);
    write_scalar_attribute<double>(window, "training_seconds", p.training_seconds);
    write_scalar_attribute<double>(window, "total_tokens", p.total_tokens);
    write_scalar_attribute<int64_t>(window, "gradient_steps", p.gradient_steps);

    H5::Group rng = file.createGroup(kRng);
    write_string_dataset(rng, "data", c.data_rng);
    write_string_dataset(rng, "positions", c.position_rng);
    const auto torch_rng = c.torch_rng.contiguous();
    write_bytes(rng, "torch", torch_rng.data_ptr<uint8_t>(), torch_rng.numel());
    if (c.cuda_rng.defined()) {
      const auto cuda_rng = c.cuda_rng.contiguous();
      write_bytes(rng, "cuda", cuda_rng.data_ptr<uint8_t>(), cuda_rng.numel());
    }

    H5::Group model = file.createGroup(kModel);
    for (const auto& [name, tensor] : c.model) write_tensor(model, name, tensor);
    H5::Group optimizer = file.createGroup(kOptimizer);
    for (const auto& [name, tensor] : c.optimizer)
      if (tensor.scalar_type() == torch::kInt64) write_int_tensor(optimizer, name, tensor);
      else write_tensor(optimizer, name, tensor);

    H5::Group curve_rows = file.createGroup(kEvaluationCurve);
    write_evaluation_rows(curve_rows, p.evaluation_curve);
    H5::Group snapshots = file.createGroup(kSnapshots);
    write_snapshots(snapshots, p.snapshots);
    H5::Group trained = file.createGroup(kTrainedRows);
    write_trained_rows(trained, c.trained_rows);
    write_bytes(root, kGradientRecord, c.gradient_seen.data(), c.gradient_seen.size());
  });
}

TrainingCheckpoint read_training_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error("checkpoint " + path + " does not exist");
  return with_hdf5_errors("read checkpoint", path, [&] {
    H5::H5File file(path, H5F_ACC_RDONLY);
    H5::Group root = file.openGroup("/");
    const auto version = read_scalar_attribute<int64_t>(file, kVersionAttr);
    if (version != kCheckpointVersion)
      throw std::runtime_error("checkpoint " + path + " has version " + std::to_string(version) +
                               "; this pelab reads version " + std::to_string(kCheckpointVersion));
    TrainingCheckpoint c;
    c.config_yaml = read_string_dataset(root, kConfig);
    c.threads = read_scalar_attribute<int64_t>(file, kThreadsAttr);
    TrainerProgress& p = c.progress;
    p.step = read_scalar_attribute<int64_t>(file, kStepAttr);
    p.curve = read_training_curve(file.openGroup(kCurve));
    H5::Group window = file.openGroup(kWindow);
    p.window_loss = read_scalar_attribute<double>(window, "loss");
    p.window_accuracy = read_scalar_attribute<double>(window, "accuracy");
    p.window_tokens = read_scalar_attribute<double>(window, "tokens");
    p.window_seconds = read_scalar_attribute<double>(window, "seconds");
    p.window_steps = read_scalar_attribute<int64_t>(window, "steps");
    p.training_seconds = read_scalar_attribute<double>(window, "training_seconds");
    p.total_tokens = read_scalar_attribute<double>(window, "total_tokens");
    p.gradient_steps = read_scalar_attribute<int64_t>(window, "gradient_steps");

    H5::Group rng = file.openGroup(kRng);
    c.data_rng = read_string_dataset(rng, "data");
    c.position_rng = read_string_dataset(rng, "positions");
    c.torch_rng = bytes_tensor(read_bytes(rng, "torch"));
    if (H5Lexists(rng.getId(), "cuda", H5P_DEFAULT) > 0) c.cuda_rng = bytes_tensor(read_bytes(rng, "cuda"));
    H5::Group model = file.openGroup(kModel);
    for (const auto& name : member_names(model)) c.model.emplace_back(name, read_tensor(model, name));
    H5::Group optimizer = file.openGroup(kOptimizer);
    for (const auto& name : member_names(optimizer)) {
      if (optimizer.openDataSet(name).getTypeClass() == H5T_INTEGER)  // step counts
        c.optimizer.emplace_back(name, torch::tensor(read_vector<int64_t>(optimizer, name), torch::kInt64));
      else
        c.optimizer.emplace_back(name, read_tensor(optimizer, name));
    }

    p.evaluation_curve = read_evaluation_rows(file.openGroup(kEvaluationCurve));
    p.snapshots = read_snapshots(file.openGroup(kSnapshots));
    c.trained_rows = read_trained_rows(file.openGroup(kTrainedRows));
    if (root.exists(kGradientRecord)) {
      c.gradient_seen = read_bytes(root, kGradientRecord);
    } else {  // a checkpoint from before: 1 nonzero; 0 is taken as zero so far (a warning, not an error)
      c.gradient_seen = read_bytes(root, kGradientSeen);
      for (auto& b : c.gradient_seen) b = b ? 2 : 1;
    }
    return c;
  });
}

}  // namespace pelab
