// HDF5 helpers shared by the run file, the sweep index and the training checkpoint:
// typed attributes and 1-D datasets, tensors, and HDF5 errors turned into one line.
#pragma once

#include <H5Cpp.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/io/atomic_file.h"
#include "core/io/schema.h"
#include "core/analysis/attention_summary.h"
#include "core/analysis/probes.h"
#include "core/io/results.h"

namespace pelab::hdf5 {

inline const H5::StrType& string_type() {
  static const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  return type;
}

template <typename T>
const H5::PredType& native_type();
template <>
inline const H5::PredType& native_type<double>() { return H5::PredType::NATIVE_DOUBLE; }
template <>
inline const H5::PredType& native_type<int64_t>() { return H5::PredType::NATIVE_INT64; }

inline void write_string_attribute(H5::H5Object& object, const std::string& name, const std::string& value) {
  object.createAttribute(name, string_type(), H5::DataSpace(H5S_SCALAR)).write(string_type(), value);
}

template <typename T>
void write_scalar_attribute(H5::H5Object& object, const std::string& name, T value) {
  object.createAttribute(name, native_type<T>(), H5::DataSpace(H5S_SCALAR)).write(native_type<T>(), &value);
}

template <typename T>
void write_vector(H5::Group& group, const std::string& name, const std::vector<T>& values) {
  hsize_t dims[1] = {values.size()};
  H5::DataSpace space(1, dims);
  auto dataset = group.createDataSet(name, native_type<T>(), space);
  if (!values.empty()) dataset.write(values.data(), native_type<T>());
}

inline void write_strings(H5::Group& group, const std::string& name, const std::vector<std::string>& values) {
  std::vector<const char*> pointers;
  for (const auto& v : values) pointers.push_back(v.c_str());
  hsize_t dims[1] = {values.size()};
  auto dataset = group.createDataSet(name, string_type(), H5::DataSpace(1, dims));
  if (!values.empty()) dataset.write(pointers.data(), string_type());
}

inline std::vector<std::string> read_strings(const H5::Group& group, const std::string& name) {
  H5::DataSet dataset = group.openDataSet(name);
  H5::DataSpace space = dataset.getSpace();
  hsize_t dims[1] = {0};
  space.getSimpleExtentDims(dims);
  std::vector<char*> pointers(dims[0], nullptr);
  if (pointers.empty()) return {};
  dataset.read(pointers.data(), string_type());
  std::vector<std::string> values(pointers.begin(), pointers.end());
  H5::DataSet::vlenReclaim(pointers.data(), string_type(), space);
  return values;
}

inline std::string read_string_attribute(const H5::H5Object& object, const std::string& name) {
  std::string value;
  H5::Attribute attribute = object.openAttribute(name);
  attribute.read(attribute.getStrType(), value);
  return value;
}

template <typename T>
T read_scalar_attribute(const H5::H5Object& object, const std::string& name) {
  T value{};
  object.openAttribute(name).read(native_type<T>(), &value);
  return value;
}

template <typename T>
std::vector<T> read_vector(const H5::Group& group, const std::string& name) {
  H5::DataSet dataset = group.openDataSet(name);
  hsize_t dims[1] = {0};
  dataset.getSpace().getSimpleExtentDims(dims);
  std::vector<T> values(dims[0]);
  if (!values.empty()) dataset.read(values.data(), native_type<T>());
  return values;
}

inline void write_tensor(H5::Group& group, const std::string& name, const torch::Tensor& tensor) {
  auto t = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  H5::DataSpace space = dims.empty() ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(dims.size(), dims.data());
  H5::DSetCreatPropList properties;
  if (t.numel() >= 4096) {  // compress large tensors; tiny ones are cheaper raw
    properties.setChunk(dims.size(), dims.data());
    properties.setDeflate(4);
  }
  group.createDataSet(name, H5::PredType::NATIVE_FLOAT, space, properties)
      .write(t.data_ptr<float>(), H5::PredType::NATIVE_FLOAT);
}

inline torch::Tensor read_tensor(const H5::Group& group, const std::string& name) {
  H5::DataSet dataset = group.openDataSet(name);
  H5::DataSpace space = dataset.getSpace();
  std::vector<hsize_t> dims(space.getSimpleExtentNdims());
  if (!dims.empty()) space.getSimpleExtentDims(dims.data());
  std::vector<int64_t> shape(dims.begin(), dims.end());
  auto t = torch::empty(shape, torch::kFloat32);
  dataset.read(t.data_ptr<float>(), H5::PredType::NATIVE_FLOAT);
  return t;
}

inline void write_int_tensor(H5::Group& group, const std::string& name, const torch::Tensor& tensor) {
  auto t = tensor.to(torch::kCPU, torch::kInt64).contiguous();
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  H5::DataSpace space(dims.size(), dims.data());
  group.createDataSet(name, H5::PredType::NATIVE_INT64, space).write(t.data_ptr<int64_t>(), H5::PredType::NATIVE_INT64);
}

// A scalar string dataset (the run file's and the checkpoint's config, RNG states).
inline void write_string_dataset(H5::Group& group, const std::string& name, const std::string& value) {
  group.createDataSet(name, string_type(), H5::DataSpace(H5S_SCALAR)).write(value, string_type());
}

inline std::string read_string_dataset(const H5::Group& group, const std::string& name) {
  std::string value;
  group.openDataSet(name).read(value, string_type());
  return value;
}

// One 1-D dataset from one field of every row (a table stored column by column).
template <typename Row, typename T>
void write_column(H5::Group& group, const std::string& name, const std::vector<Row>& rows, T Row::*field) {
  std::vector<T> column;
  for (const auto& row : rows) column.push_back(row.*field);
  if constexpr (std::is_same_v<T, std::string>) write_strings(group, name, column);
  else write_vector(group, name, column);
}

// The inverse: one field of every row from a 1-D dataset; `rows` takes the dataset's length.
template <typename Row, typename T>
void read_column(const H5::Group& group, const std::string& name, std::vector<Row>& rows, T Row::*field) {
  std::vector<T> column;
  if constexpr (std::is_same_v<T, std::string>) column = read_strings(group, name);
  else column = read_vector<T>(group, name);
  rows.resize(column.size());
  for (size_t i = 0; i < column.size(); ++i) rows[i].*field = std::move(column[i]);
}

// The training curve's 1-D datasets and its skipped_steps attribute (the run file's
// /training and the checkpoint's /curve).
inline void write_training_curve(H5::Group& group, const TrainingCurve& curve) {
  write_vector(group, schema::kStep, curve.step);
  write_vector(group, schema::kLoss, curve.loss);
  write_vector(group, schema::kAccuracy, curve.accuracy);
  write_vector(group, schema::kLearningRate, curve.learning_rate);
  write_vector(group, schema::kTokensPerSecond, curve.tokens_per_second);
  write_vector(group, schema::kPhase, curve.phase);
  write_scalar_attribute<int64_t>(group, schema::kSkippedSteps, curve.skipped_steps);
  std::string zero;
  for (const auto& name : curve.zero_gradient_parameters) zero += (zero.empty() ? "" : ", ") + name;
  write_string_attribute(group, schema::kZeroGradientParameters, zero);
}

inline TrainingCurve read_training_curve(const H5::Group& group) {
  TrainingCurve curve;
  curve.step = read_vector<int64_t>(group, schema::kStep);
  curve.loss = read_vector<double>(group, schema::kLoss);
  curve.accuracy = read_vector<double>(group, schema::kAccuracy);
  curve.learning_rate = read_vector<double>(group, schema::kLearningRate);
  curve.tokens_per_second = read_vector<double>(group, schema::kTokensPerSecond);
  // files from before train.phases have no phase: every row in phase 0
  curve.phase = group.exists(schema::kPhase) ? read_vector<int64_t>(group, schema::kPhase)
                                             : std::vector<int64_t>(curve.step.size(), 0);
  curve.skipped_steps = read_scalar_attribute<int64_t>(group, schema::kSkippedSteps);
  if (group.attrExists(schema::kZeroGradientParameters)) {
    const std::string zero = read_string_attribute(group, schema::kZeroGradientParameters);
    for (size_t start = 0; start < zero.size();) {
      const size_t end = std::min(zero.find(", ", start), zero.size());
      curve.zero_gradient_parameters.push_back(zero.substr(start, end - start));
      start = end + 2;
    }
  }
  return curve;
}

// The evaluation table's columns (the run file's /evaluation and /evaluation_curve, the
// checkpoint's curve), with attention statistics when every row has them.
void write_evaluation_rows(H5::Group& group, const std::vector<EvalResult>& rows);
std::vector<EvalResult> read_evaluation_rows(const H5::Group& group);
// Kept parameters by step (step_<S> groups with attr step), read back by step; and the
// position tables' trained rows (uint8 datasets with attrs row_kind, first_row_value). The
// run file's /snapshots and /trained_rows, the checkpoint's too.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
void write_snapshots(H5::Group& group, const std::vector<std::pair<int64_t, NamedTensors>>& snapshots);
std::vector<std::pair<int64_t, NamedTensors>> read_snapshots(const H5::Group& group);
void write_trained_rows(H5::Group& group, const std::vector<TrainedRows>& tables);
std::vector<TrainedRows> read_trained_rows(const H5::Group& group);

inline std::vector<std::string> member_names(const H5::Group& group) {
  std::vector<std::string> names;
  for (hsize_t i = 0; i < group.getNumObjs(); ++i) names.push_back(group.getObjnameByIdx(i));
  return names;
}

// The innermost message of HDF5's current error stack: where a failure started, e.g. the
// operating system's "No space left on device" under a generic "H5Dwrite failed".
inline std::string innermost_hdf5_error() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned n, const H5E_error2_t* error, void* data) -> herr_t {
             if (n == 0 && error->desc) *static_cast<std::string*>(data) = error->desc;
             return 0;
           },
           &message);
  // the sec2 driver's "file write failed: time = ..., errno = 28, error message = '...', ..."
  const std::string marker = "error message = '";
  const auto at = message.find(marker);
  if (at != std::string::npos) message = message.substr(at + marker.size(), message.find('\'', at + marker.size()) - at - marker.size());
  for (char& c : message)
    if (c == '\n') c = ' ';
  return message;
}

// One HDF5 call at a time in the process: the runs of a packed process (pelab sweep
// --runs-per-process) write their checkpoints and run files from their own threads, and
// HDF5's C++ layer is not thread-safe (its C library here is, with one global lock).
inline std::recursive_mutex& hdf5_lock() {
  static std::recursive_mutex lock;
  return lock;
}

// Runs `body` under hdf5_lock(), turning HDF5's exceptions into one std::runtime_error line:
// "cannot <what> <path>: <HDF5's message> (<where it started>)".
template <typename F>
auto with_hdf5_errors(const std::string& what, const std::string& path, F&& body) {
  std::lock_guard<std::recursive_mutex> lock(hdf5_lock());
  H5::Exception::dontPrint();
  try {
    return body();
  } catch (const H5::Exception& e) {
    std::string cause = innermost_hdf5_error();
    std::string detail = e.getDetailMsg();
    if (!cause.empty() && detail.find(cause) == std::string::npos) detail += " (" + cause + ")";
    throw std::runtime_error("cannot " + what + " " + path + ": " + detail);
  }
}

// Builds an HDF5 file in memory (the core driver, no backing store) with `fill(file)`, then
// writes its image with write_file_atomically: the only disk I/O is one checked write, so a
// full disk is one clean error and never a half-closed HDF5 file. `fill` may read the file
// at `path` as it is (pelab eval copies what stays from it): the new one replaces it only
// at the end.
template <typename F>
void write_hdf5_file(const std::string& path, const std::string& what, F&& fill) {
  std::vector<char> image;
  with_hdf5_errors("write " + what, path, [&] {
    H5::FileAccPropList access;
    if (H5Pset_fapl_core(access.getId(), 1 << 20, /*backing_store=*/false) < 0)
      throw H5::FileIException("H5Pset_fapl_core", "cannot use the core driver");
    // named apart from `path`: the core driver refuses a name of a file on disk it may read
    H5::H5File file(path + ".in-memory", H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, access);
    fill(file);
    file.flush(H5F_SCOPE_GLOBAL);
    const ssize_t size = H5Fget_file_image(file.getId(), nullptr, 0);
    if (size < 0) throw H5::FileIException("H5Fget_file_image", "cannot take the file image");
    image.resize(static_cast<size_t>(size));
    if (H5Fget_file_image(file.getId(), image.data(), image.size()) != size)
      throw H5::FileIException("H5Fget_file_image", "cannot copy the file image");
    file.close();
    return 0;
  });
  write_file_atomically(path, image.data(), image.size(), what);
}

}  // namespace pelab::hdf5
