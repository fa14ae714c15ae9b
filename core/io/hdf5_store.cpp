#include "core/io/hdf5_store.h"

#include <H5Cpp.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "core/config/options.h"
#include "core/io/atomic_file.h"
#include "core/io/hdf5_util.h"
#include "core/io/schema.h"

namespace pelab {

namespace fs = std::filesystem;
namespace s = schema;

using namespace hdf5;

namespace {

// IEEE half precision (h5py reads it as numpy float16); HDF5 converts float32 on write.
H5::FloatType half_type() {
  H5::FloatType type(H5::PredType::IEEE_F32LE);
  type.setFields(15, 10, 5, 0, 10);
  type.setOffset(0);
  type.setPrecision(16);
  type.setSize(2);
  type.setEbias(15);
  return type;
}

// A float32 tensor stored chunked (one chunk per trailing (T, T) map) and compressed.
void write_maps(H5::Group& group, const std::string& name, const torch::Tensor& tensor, bool float16) {
  auto t = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end()), chunk(dims.size(), 1);
  for (size_t k = dims.size() >= 2 ? dims.size() - 2 : 0; k < dims.size(); ++k) chunk[k] = dims[k];
  H5::DataSpace space(dims.size(), dims.data());
  H5::DSetCreatPropList properties;
  properties.setChunk(chunk.size(), chunk.data());
  properties.setShuffle();
  properties.setDeflate(4);
  if (float16) {
    group.createDataSet(name, half_type(), space, properties).write(t.data_ptr<float>(), H5::PredType::NATIVE_FLOAT);
  } else {
    group.createDataSet(name, H5::PredType::NATIVE_FLOAT, space, properties)
        .write(t.data_ptr<float>(), H5::PredType::NATIVE_FLOAT);
  }
}

void write_attention_maps(H5::H5File& file, const std::vector<AttentionMaps>& maps, bool float16) {
  if (maps.empty()) return;
  H5::Group attention = file.exists(s::kAttention) ? file.openGroup(s::kAttention) : file.createGroup(s::kAttention);
  for (const auto& m : maps) {
    const std::string name = s::kAttentionLengthPrefix + std::to_string(m.length);
    if (attention.exists(name)) attention.unlink(name);
    H5::Group group = attention.createGroup(name);
    write_maps(group, s::kProbs, m.probs, float16);
    write_int_tensor(group, s::kTokens, m.tokens);
    if (m.positions.is_floating_point()) {  // a continuous sampler's real-valued positions
      auto t = m.positions.to(torch::kCPU, torch::kFloat64).contiguous();
      std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
      group.createDataSet(s::kPositions, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(dims.size(), dims.data()))
          .write(t.data_ptr<double>(), H5::PredType::NATIVE_DOUBLE);
    } else {
      write_int_tensor(group, s::kPositions, m.positions);
    }
    write_scalar_attribute<int64_t>(group, s::kLength, m.length);
    write_scalar_attribute<int64_t>(group, s::kExamples, m.probs.size(0));
    write_scalar_attribute<int64_t>(group, s::kEvalStep, m.step);
    write_string_attribute(group, s::kMethod, m.method);
    write_string_attribute(group, s::kEvalSampler, m.sampler);
    write_scalar_attribute<int64_t>(group, s::kEvalPositionsMaxLength, m.positions_max_length);
    if (!m.terms.empty()) {
      H5::Group terms = group.createGroup(s::kTerms);
      write_strings(terms, s::kTermNames, m.terms.names);
      write_tensor(terms, s::kTermMeanAbs, m.terms.mean_abs);
      write_tensor(terms, s::kTermCorrelation, m.terms.correlation);
      write_tensor(terms, s::kScoresMeanAbs, m.terms.scores_mean_abs);
    }
  }
}


void write_evaluation_attributes(H5::Group& evaluation, const RunRecord& r) {
  write_scalar_attribute<int64_t>(evaluation, s::kTrainMinLength, r.train_min_length);
  write_scalar_attribute<int64_t>(evaluation, s::kTrainMaxLength, r.train_max_length);
  write_scalar_attribute<int64_t>(evaluation, s::kTrainSteps, r.train_steps);
  write_string_attribute(evaluation, s::kTaskFormat, r.task_format);
  write_string_attribute(evaluation, s::kProtocol, r.evaluation_protocol);
  write_string_attribute(evaluation, s::kRunSampler, r.run_sampler);
  write_scalar_attribute<int64_t>(evaluation, s::kRunPositionsMaxLength, r.run_positions_max_length);
}

void write_probes(H5::H5File& file, const std::vector<ProbeResult>& rows) {
  H5::Group probes = file.createGroup(s::kProbes);
  write_column(probes, s::kLength, rows, &ProbeResult::length);
  write_column(probes, s::kProbeLayer, rows, &ProbeResult::layer);
  write_column(probes, s::kPositionAccuracy, rows, &ProbeResult::position_accuracy);
  write_column(probes, s::kPositionChance, rows, &ProbeResult::position_chance);
  write_column(probes, s::kPositionR2, rows, &ProbeResult::position_r2);
  write_column(probes, s::kOrderAccuracy, rows, &ProbeResult::order_accuracy);
  write_column(probes, s::kDistanceR2, rows, &ProbeResult::distance_r2);
  write_column(probes, s::kEvalStep, rows, &ProbeResult::step);
  write_column(probes, s::kMethod, rows, &ProbeResult::method);
  write_column(probes, s::kEvalSampler, rows, &ProbeResult::sampler);
  write_column(probes, s::kEvalPositionsMaxLength, rows, &ProbeResult::positions_max_length);
}

std::vector<ProbeResult> read_probes(const H5::Group& probes) {
  std::vector<ProbeResult> rows;
  read_column(probes, s::kLength, rows, &ProbeResult::length);
  read_column(probes, s::kProbeLayer, rows, &ProbeResult::layer);
  read_column(probes, s::kPositionAccuracy, rows, &ProbeResult::position_accuracy);
  read_column(probes, s::kPositionChance, rows, &ProbeResult::position_chance);
  read_column(probes, s::kPositionR2, rows, &ProbeResult::position_r2);
  read_column(probes, s::kOrderAccuracy, rows, &ProbeResult::order_accuracy);
  read_column(probes, s::kDistanceR2, rows, &ProbeResult::distance_r2);
  read_column(probes, s::kEvalStep, rows, &ProbeResult::step);
  if (probes.exists(s::kMethod)) read_column(probes, s::kMethod, rows, &ProbeResult::method);  // absent before: none
  read_column(probes, s::kEvalSampler, rows, &ProbeResult::sampler);
  read_column(probes, s::kEvalPositionsMaxLength, rows, &ProbeResult::positions_max_length);
  return rows;
}

}  // namespace

// The evaluation table's columns (the run file's /evaluation and /evaluation_curve).
void hdf5::write_evaluation_rows(H5::Group& group, const std::vector<EvalResult>& rows) {
  write_column(group, s::kMethod, rows, &EvalResult::method);
  write_column(group, s::kLength, rows, &EvalResult::length);
  write_column(group, s::kSequenceLength, rows, &EvalResult::sequence_length);
  write_column(group, s::kSamples, rows, &EvalResult::samples);
  write_column(group, s::kLoss, rows, &EvalResult::loss);
  write_column(group, s::kPerTokenAccuracy, rows, &EvalResult::per_token_accuracy);
  write_column(group, s::kPerSequenceAccuracy, rows, &EvalResult::per_sequence_accuracy);
  write_column(group, s::kChanceTokenAccuracy, rows, &EvalResult::chance_token_accuracy);
  write_column(group, s::kChanceSequenceAccuracy, rows, &EvalResult::chance_sequence_accuracy);
  write_column(group, s::kChanceLoss, rows, &EvalResult::chance_loss);
  write_column(group, s::kPositionFreeTokenAccuracy, rows, &EvalResult::position_free_token_accuracy);
  write_column(group, s::kPositionFreeSequenceAccuracy, rows, &EvalResult::position_free_sequence_accuracy);
  write_column(group, s::kEvalStep, rows, &EvalResult::step);
  write_column(group, s::kEvalSampler, rows, &EvalResult::sampler);
  write_column(group, s::kEvalPositionsMaxLength, rows, &EvalResult::positions_max_length);
  write_column(group, s::kUntrained, rows, &EvalResult::untrained);
  write_column(group, s::kCondition, rows, &EvalResult::condition);
  write_column(group, s::kConditionValue, rows, &EvalResult::condition_value);
  bool statistics = !rows.empty();
  for (const auto& row : rows) statistics = statistics && !row.attention.empty();
  if (!statistics) return;
  H5::Group stats = group.createGroup(s::kAttentionStatistics);
  const hsize_t dims[3] = {rows.size(), hsize_t(rows.front().attention.layers), hsize_t(rows.front().attention.heads)};
  auto write_stat = [&](const char* name, std::vector<double> AttentionSummary::*field) {
    std::vector<double> values;
    for (const auto& e : rows) values.insert(values.end(), (e.attention.*field).begin(), (e.attention.*field).end());
    stats.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(3, dims))
        .write(values.data(), H5::PredType::NATIVE_DOUBLE);
  };
  write_stat(s::kMeanDistance, &AttentionSummary::mean_distance);
  write_stat(s::kEntropy, &AttentionSummary::entropy);
  write_stat(s::kDiagonal, &AttentionSummary::diagonal);
  write_stat(s::kFirstToken, &AttentionSummary::first);
  write_stat(s::kLastToken, &AttentionSummary::last);
}

std::vector<EvalResult> hdf5::read_evaluation_rows(const H5::Group& group) {
  std::vector<EvalResult> rows;
  read_column(group, s::kMethod, rows, &EvalResult::method);
  read_column(group, s::kLength, rows, &EvalResult::length);
  read_column(group, s::kSequenceLength, rows, &EvalResult::sequence_length);
  read_column(group, s::kSamples, rows, &EvalResult::samples);
  read_column(group, s::kLoss, rows, &EvalResult::loss);
  read_column(group, s::kPerTokenAccuracy, rows, &EvalResult::per_token_accuracy);
  read_column(group, s::kPerSequenceAccuracy, rows, &EvalResult::per_sequence_accuracy);
  read_column(group, s::kChanceTokenAccuracy, rows, &EvalResult::chance_token_accuracy);
  read_column(group, s::kChanceSequenceAccuracy, rows, &EvalResult::chance_sequence_accuracy);
  read_column(group, s::kChanceLoss, rows, &EvalResult::chance_loss);
  if (group.exists(s::kPositionFreeTokenAccuracy)) {  // absent before: NaN
    read_column(group, s::kPositionFreeTokenAccuracy, rows, &EvalResult::position_free_token_accuracy);
    read_column(group, s::kPositionFreeSequenceAccuracy, rows, &EvalResult::position_free_sequence_accuracy);
  }
  read_column(group, s::kEvalStep, rows, &EvalResult::step);
  read_column(group, s::kEvalSampler, rows, &EvalResult::sampler);
  read_column(group, s::kEvalPositionsMaxLength, rows, &EvalResult::positions_max_length);
  read_column(group, s::kUntrained, rows, &EvalResult::untrained);
  if (group.exists(s::kCondition)) {  // absent before: no condition
    read_column(group, s::kCondition, rows, &EvalResult::condition);
    read_column(group, s::kConditionValue, rows, &EvalResult::condition_value);
  }
  if (group.exists(s::kAttentionStatistics)) {
    H5::Group stats = group.openGroup(s::kAttentionStatistics);
    auto read_stat = [&](const char* name, std::vector<double> AttentionSummary::*field) {
      H5::DataSet dataset = stats.openDataSet(name);
      hsize_t dims[3] = {0, 0, 0};
      dataset.getSpace().getSimpleExtentDims(dims);
      std::vector<double> values(dims[0] * dims[1] * dims[2]);
      dataset.read(values.data(), H5::PredType::NATIVE_DOUBLE);
      for (hsize_t row = 0; row < dims[0] && row < rows.size(); ++row) {
        AttentionSummary& a = rows[row].attention;
        a.layers = dims[1];
        a.heads = dims[2];
        const auto begin = values.begin() + row * dims[1] * dims[2];
        a.*field = std::vector<double>(begin, begin + dims[1] * dims[2]);
      }
    };
    read_stat(s::kMeanDistance, &AttentionSummary::mean_distance);
    read_stat(s::kEntropy, &AttentionSummary::entropy);
    read_stat(s::kDiagonal, &AttentionSummary::diagonal);
    read_stat(s::kFirstToken, &AttentionSummary::first);
    read_stat(s::kLastToken, &AttentionSummary::last);
  }
  return rows;
}

void hdf5::write_snapshots(H5::Group& group, const std::vector<std::pair<int64_t, NamedTensors>>& snapshots) {
  for (const auto& [step, tensors] : snapshots) {
    H5::Group snapshot = group.createGroup(s::kSnapshotPrefix + std::to_string(step));
    write_scalar_attribute<int64_t>(snapshot, s::kEvalStep, step);
    for (const auto& [name, tensor] : tensors) write_tensor(snapshot, name, tensor);
  }
}

std::vector<std::pair<int64_t, hdf5::NamedTensors>> hdf5::read_snapshots(const H5::Group& group) {
  std::vector<std::pair<int64_t, NamedTensors>> snapshots;
  for (const auto& group_name : member_names(group)) {
    H5::Group snapshot = group.openGroup(group_name);
    NamedTensors tensors;
    for (const auto& name : member_names(snapshot)) tensors.emplace_back(name, read_tensor(snapshot, name));
    snapshots.emplace_back(read_scalar_attribute<int64_t>(snapshot, s::kEvalStep), std::move(tensors));
  }
  std::sort(snapshots.begin(), snapshots.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return snapshots;
}

void hdf5::write_trained_rows(H5::Group& group, const std::vector<TrainedRows>& tables) {
  for (const auto& t : tables) {
    hsize_t dims[1] = {t.trained.size()};
    auto dataset = group.createDataSet(t.parameter, H5::PredType::NATIVE_UINT8, H5::DataSpace(1, dims));
    if (!t.trained.empty()) dataset.write(t.trained.data(), H5::PredType::NATIVE_UINT8);
    write_string_attribute(dataset, s::kRowKind, t.row_kind);
    write_scalar_attribute<int64_t>(dataset, s::kFirstRowValue, t.first_row_value);
  }
}

std::vector<TrainedRows> hdf5::read_trained_rows(const H5::Group& group) {
  std::vector<TrainedRows> tables;
  for (const auto& name : member_names(group)) {
    H5::DataSet dataset = group.openDataSet(name);
    TrainedRows t;
    t.parameter = name;
    t.row_kind = read_string_attribute(dataset, s::kRowKind);
    t.first_row_value = read_scalar_attribute<int64_t>(dataset, s::kFirstRowValue);
    hsize_t dims[1] = {0};
    dataset.getSpace().getSimpleExtentDims(dims);
    t.trained.resize(dims[0]);
    if (dims[0]) dataset.read(t.trained.data(), H5::PredType::NATIVE_UINT8);
    tables.push_back(std::move(t));
  }
  return tables;
}

std::map<std::string, int64_t> count_parameters(torch::nn::Module& model) {
  std::map<std::string, int64_t> counts;
  int64_t total = 0;
  for (const auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    // Group by the top-level module; blocks are counted one by one ("blocks.3").
    auto dot = name.find('.');
    std::string module = name.substr(0, dot);
    if (module == "blocks" && dot != std::string::npos) module = name.substr(0, name.find('.', dot + 1));
    counts[module] += p.value().numel();
    total += p.value().numel();
  }
  counts[s::kTotal] = total;
  return counts;
}

std::vector<std::pair<std::string, torch::Tensor>> checkpoint_of(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  // copies: on the CPU, .cpu() would share memory with parameters that training goes on changing
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value().detach().to(torch::kCPU, false, true));
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value().detach().to(torch::kCPU, false, true));
  return out;
}

void load_named_tensors(torch::nn::Module& model, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                        const std::string& source) {
  std::map<std::string, torch::Tensor> stored(tensors.begin(), tensors.end());
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  auto copy_into = [&](const std::string& name, torch::Tensor& target) {
    auto it = stored.find(name);
    if (it == stored.end())
      throw std::runtime_error(source + ": checkpoint has no tensor '" + name + "' (was it made with another config?)");
    if (it->second.sizes() != target.sizes())
      throw std::runtime_error(source + ": checkpoint tensor '" + name + "' has shape " +
                               c10::str(it->second.sizes()) + ", the model expects " + c10::str(target.sizes()));
    target.copy_(it->second.to(target.dtype()));
    used.insert(name);
  };
  for (auto& p : model.named_parameters()) copy_into(p.key(), p.value());
  for (auto& b : model.named_buffers()) copy_into(b.key(), b.value());
  for (const auto& [name, tensor] : stored)
    if (!used.count(name)) throw std::runtime_error(source + ": checkpoint tensor '" + name + "' is not in the model");
}

void write_run_file(const std::string& path, const RunRecord& r) {
  const fs::path final_path(path);
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
  write_hdf5_file(path, "HDF5 run file", [&](H5::H5File& file) {
    write_scalar_attribute<int64_t>(file, s::kSchemaVersionAttr, s::kSchemaVersion);
    write_string_attribute(file, s::kRunNameAttr, r.run_name);
    write_string_attribute(file, s::kStatusAttr, "complete");
    H5::Group root = file.openGroup("/");
    write_string_dataset(root, s::kConfig, r.config_yaml);

    H5::Group env = file.createGroup(s::kEnvironment);
    write_string_attribute(env, s::kPelabVersion, r.environment.pelab_version);
    write_string_attribute(env, s::kGitCommit, r.environment.git_commit);
    write_string_attribute(env, s::kTorchVersion, r.environment.torch_version);
    write_string_attribute(env, s::kDevice, r.environment.device);
    write_string_attribute(env, s::kHostname, r.environment.hostname);
    write_string_attribute(env, s::kCreatedUtc, r.environment.created_utc);
    write_string_attribute(env, s::kCpuKernels, r.environment.cpu_kernels);
    write_scalar_attribute<int64_t>(env, s::kThreads, r.environment.threads);
    write_scalar_attribute<double>(env, s::kTrainingSeconds, r.training_seconds);

    H5::Group counts = file.createGroup(s::kParameterCounts);
    for (const auto& [module, count] : r.parameter_counts) write_scalar_attribute<int64_t>(counts, module, count);

    H5::Group training = file.createGroup(s::kTraining);
    write_training_curve(training, r.training);

    H5::Group evaluation = file.createGroup(s::kEvaluation);
    write_evaluation_rows(evaluation, r.evaluation);
    write_evaluation_attributes(evaluation, r);
    if (!r.evaluation_curve.empty()) {
      H5::Group curve = file.createGroup(s::kEvaluationCurve);
      write_evaluation_rows(curve, r.evaluation_curve);
    }
    write_attention_maps(file, r.attention_maps, r.attention_float16);
    if (!r.probes.empty()) write_probes(file, r.probes);
    H5::Group checkpoint = file.createGroup(s::kCheckpoint);
    for (const auto& [name, tensor] : r.checkpoint) write_tensor(checkpoint, name, tensor);
    if (!r.snapshots.empty()) {
      H5::Group snapshots = file.createGroup(s::kSnapshots);
      write_snapshots(snapshots, r.snapshots);
    }
    if (!r.trained_rows.empty()) {
      H5::Group trained = file.createGroup(s::kTrainedRows);
      write_trained_rows(trained, r.trained_rows);
    }
  });
}

RunRecord read_run_file(const std::string& path, bool with_checkpoint) {
  if (!fs::exists(path)) throw std::runtime_error("run file " + path + " does not exist");
  return with_hdf5_errors("read HDF5 run file", path, [&] {
    H5::H5File file(path, H5F_ACC_RDONLY);
    const auto version = read_scalar_attribute<int64_t>(file, s::kSchemaVersionAttr);
    if (version != s::kSchemaVersion)
      throw std::runtime_error(path + " has schema_version " + std::to_string(version) + "; this pelab reads " +
                               std::to_string(s::kSchemaVersion));
    RunRecord r;
    r.run_name = read_string_attribute(file, s::kRunNameAttr);
    r.config_yaml = read_string_dataset(file.openGroup("/"), s::kConfig);

    H5::Group env = file.openGroup(s::kEnvironment);
    r.environment.pelab_version = read_string_attribute(env, s::kPelabVersion);
    r.environment.git_commit = read_string_attribute(env, s::kGitCommit);
    r.environment.torch_version = read_string_attribute(env, s::kTorchVersion);
    r.environment.device = read_string_attribute(env, s::kDevice);
    r.environment.hostname = read_string_attribute(env, s::kHostname);
    r.environment.created_utc = read_string_attribute(env, s::kCreatedUtc);
    if (env.attrExists(s::kCpuKernels)) r.environment.cpu_kernels = read_string_attribute(env, s::kCpuKernels);
    r.environment.threads = read_scalar_attribute<int64_t>(env, s::kThreads);
    r.training_seconds = read_scalar_attribute<double>(env, s::kTrainingSeconds);

    H5::Group counts = file.openGroup(s::kParameterCounts);
    for (int i = 0; i < counts.getNumAttrs(); ++i) {
      const std::string name = counts.openAttribute(static_cast<unsigned>(i)).getName();
      r.parameter_counts[name] = read_scalar_attribute<int64_t>(counts, name);
    }

    r.training = read_training_curve(file.openGroup(s::kTraining));

    H5::Group evaluation = file.openGroup(s::kEvaluation);
    r.evaluation = read_evaluation_rows(evaluation);
    r.task_format = read_string_attribute(evaluation, s::kTaskFormat);
    r.evaluation_protocol = read_string_attribute(evaluation, s::kProtocol);
    r.train_steps = read_scalar_attribute<int64_t>(evaluation, s::kTrainSteps);
    r.run_sampler = read_string_attribute(evaluation, s::kRunSampler);
    r.run_positions_max_length = read_scalar_attribute<int64_t>(evaluation, s::kRunPositionsMaxLength);
    if (file.exists(s::kEvaluationCurve)) r.evaluation_curve = read_evaluation_rows(file.openGroup(s::kEvaluationCurve));
    if (file.exists(s::kProbes)) r.probes = read_probes(file.openGroup(s::kProbes));
    if (file.exists(s::kTrainedRows)) r.trained_rows = read_trained_rows(file.openGroup(s::kTrainedRows));
    r.train_min_length = read_scalar_attribute<int64_t>(evaluation, s::kTrainMinLength);
    r.train_max_length = read_scalar_attribute<int64_t>(evaluation, s::kTrainMaxLength);

    if (with_checkpoint) {
      if (!file.exists(s::kCheckpoint))
        throw std::runtime_error(path + " has no /" + std::string(s::kCheckpoint) +
                                 " group (the trained parameters), which this needs");
      H5::Group checkpoint = file.openGroup(s::kCheckpoint);
      for (const auto& name : member_names(checkpoint)) r.checkpoint.emplace_back(name, read_tensor(checkpoint, name));
      if (file.exists(s::kSnapshots)) r.snapshots = read_snapshots(file.openGroup(s::kSnapshots));
    }
    return r;
  });
}

void add_to_run_file(const std::string& path, const RunFileAdditions& added) {
  if (!is_complete_run_file(path)) throw std::runtime_error(path + " is not a complete run file");
  const RunRecord before = read_run_file(path, /*with_checkpoint=*/false);
  std::set<std::string> replaced_maps;
  for (const auto& m : added.attention_maps) replaced_maps.insert(s::kAttentionLengthPrefix + std::to_string(m.length));
  // A new file: what stays is copied over (HDF5 does not give back the space of what a
  // changed file drops, so rewriting in place would grow the file at every pelab eval).
  write_hdf5_file(path, "HDF5 run file", [&](H5::H5File& file) {
    H5::H5File source(path, H5F_ACC_RDONLY);
    write_scalar_attribute<int64_t>(file, s::kSchemaVersionAttr, s::kSchemaVersion);
    write_string_attribute(file, s::kRunNameAttr, read_string_attribute(source, s::kRunNameAttr));
    write_string_attribute(file, s::kStatusAttr, read_string_attribute(source, s::kStatusAttr));
    auto copy = [&](const std::string& name) {
      if (H5Ocopy(source.getId(), name.c_str(), file.getId(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
        throw H5::FileIException("H5Ocopy", "cannot copy " + name);
    };
    for (const auto& name : member_names(source.openGroup("/"))) {
      if ((name == s::kEvaluation && !added.evaluation.empty()) || (name == s::kProbes && !added.probes.empty()))
        continue;
      if (name == s::kAttention && !replaced_maps.empty()) {
        file.createGroup(s::kAttention);
        for (const auto& length : member_names(source.openGroup(s::kAttention)))
          if (!replaced_maps.count(length)) copy(std::string(s::kAttention) + "/" + length);
        continue;
      }
      copy(name);
    }
    if (!added.evaluation.empty()) {
      H5::Group evaluation = file.createGroup(s::kEvaluation);
      write_evaluation_rows(evaluation, merge_evaluation_rows(before.evaluation, added.evaluation));
      write_evaluation_attributes(evaluation, before);
    }
    if (!added.probes.empty()) {
      std::vector<ProbeResult> probes;
      for (const auto& p : before.probes) {
        bool replaced = false;
        for (const auto& q : added.probes) replaced = replaced || p.same_settings(q);
        if (!replaced) probes.push_back(p);
      }
      probes.insert(probes.end(), added.probes.begin(), added.probes.end());
      write_probes(file, probes);
    }
    write_attention_maps(file, added.attention_maps, added.attention_float16);
  });
}

bool is_complete_run_file(const std::string& path) { return complete_run_file_version(path) == s::kSchemaVersion; }

int64_t complete_run_file_version(const std::string& path) {
  if (!fs::exists(path)) return -1;
  std::lock_guard<std::recursive_mutex> lock(hdf5_lock());
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    if (read_string_attribute(file, s::kStatusAttr) != "complete") return -1;
    return read_scalar_attribute<int64_t>(file, s::kSchemaVersionAttr);
  } catch (const H5::Exception&) {
    return -1;
  }
}

void write_sweep_index(const std::string& path, const std::string& sweep_name,
                       const std::vector<SweepIndexEntry>& entries) {
  write_hdf5_file(path, "HDF5 sweep index", [&](H5::H5File& file) {
    write_string_attribute(file, s::kSweepNameAttr, sweep_name);
    write_scalar_attribute<int64_t>(file, s::kSchemaVersionAttr, s::kSchemaVersion);
    H5::Group runs = file.createGroup(s::kSweepRuns);
    std::vector<std::string> id, status, error, overrides;
    for (const auto& e : entries) {
      id.push_back(e.id);
      status.push_back(e.status);
      error.push_back(e.error);
      overrides.push_back(e.overrides);
      if (e.status == "complete")  // relative to the index file's folder
        H5Lcreate_external(e.run_file.c_str(), "/", runs.getId(), e.id.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    }
    H5::Group table = file.createGroup(s::kSweepTable);
    write_strings(table, s::kSweepId, id);
    write_strings(table, s::kSweepStatus, status);
    write_strings(table, s::kSweepError, error);
    write_strings(table, s::kSweepOverrides, overrides);
  });
}

void load_checkpoint(const std::string& path, torch::nn::Module& model, int64_t step) {
  load_checkpoint(read_run_file(path), path, model, step);
}

void load_checkpoint(const RunRecord& record, const std::string& path, torch::nn::Module& model, int64_t step) {
  if (step < 0 || step == record.train_steps) return load_named_tensors(model, record.checkpoint, path);
  std::vector<std::string> kept;
  for (const auto& [kept_step, tensors] : record.snapshots) {
    if (kept_step == step) return load_named_tensors(model, tensors, path + ":/snapshots/step_" + std::to_string(step));
    kept.push_back(std::to_string(kept_step));
  }
  throw std::runtime_error(path + " has no snapshot of step " + std::to_string(step) + "; it keeps " +
                           (kept.empty() ? std::string("none (output.keep_checkpoints)") : "steps " + join(kept)) +
                           ", and the final parameters (step " + std::to_string(record.train_steps) + ")");
}

}  // namespace pelab
