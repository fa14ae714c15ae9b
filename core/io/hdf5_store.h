// The HDF5 run file: one per run, written under a temporary name and renamed when
// complete, so a file named run.h5 is always whole. Layout: core/io/schema.h, docs/run-files.md.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/io/environment.h"
#include "core/analysis/attention_summary.h"
#include "core/analysis/probes.h"
#include "core/io/results.h"

namespace pelab {

struct RunRecord {
  std::string run_name;
  std::string config_yaml;                    // resolved config
  Environment environment;
  double training_seconds = 0;
  std::map<std::string, int64_t> parameter_counts;  // module -> count, plus "total"
  TrainingCurve training;
  std::vector<EvalResult> evaluation;
  std::vector<EvalResult> evaluation_curve;   // eval.every: rows at steps during training
  int64_t train_min_length = 0, train_max_length = 0;
  int64_t train_steps = 0;                    // the final step
  std::string run_sampler = "contiguous";     // what evaluation uses by default (the
  int64_t run_positions_max_length = 0;       //   rows' sampler settings when not told otherwise)
  std::string task_format = "encoder";        // encoder | causal_lm | masked_lm
  std::string evaluation_protocol;            // Task::evaluation_protocol()
  std::vector<AttentionMaps> attention_maps;  // /attention/length_<L>
  bool attention_float16 = true;
  std::vector<ProbeResult> probes;            // /probes
  std::vector<std::pair<std::string, torch::Tensor>> checkpoint;  // name -> tensor (CPU)
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, torch::Tensor>>>> snapshots;  // step -> tensors
  std::vector<TrainedRows> trained_rows;      // per position table
};

// What `pelab eval` adds to a complete run file: evaluation rows (merged by settings:
// merge_evaluation_rows), probe rows (replacing those of the same length and settings) and
// attention maps (replacing those of the same length).
struct RunFileAdditions {
  std::vector<EvalResult> evaluation;
  std::vector<ProbeResult> probes;
  std::vector<AttentionMaps> attention_maps;
  bool attention_float16 = true;
};

// Parameters per top-level module (token_embedding, position_encoding, blocks.N, final_norm,
// head, ...; only modules with parameters) and "total".
std::map<std::string, int64_t> count_parameters(torch::nn::Module& model);
// Named parameters (and buffers) of `model`: detached copies on the CPU.
std::vector<std::pair<std::string, torch::Tensor>> checkpoint_of(const torch::nn::Module& model);
// Copies `stored` (checkpoint_of's form) into `model`: every parameter and buffer must be
// there with its shape, and nothing else; errors start with `source` (a file name).
void load_named_tensors(torch::nn::Module& model, const std::vector<std::pair<std::string, torch::Tensor>>& stored,
                        const std::string& source);

// Writes `path` (via `path + ".tmp"` and a rename); throws std::runtime_error on failure.
void write_run_file(const std::string& path, const RunRecord& record);
// Reads everything back but the attention maps (the checkpoint and snapshots only when
// asked); throws std::runtime_error naming the file on failure.
RunRecord read_run_file(const std::string& path, bool with_checkpoint = true);
// Adds rows and maps to a complete run file, atomically (a copy is changed and renamed over
// the file); what is not added stays as it was.
void add_to_run_file(const std::string& path, const RunFileAdditions& additions);
// True for a whole run file of this schema (status "complete"); false for anything else.
bool is_complete_run_file(const std::string& path);
// The schema version of a whole run file (status "complete") of any version; -1 for anything else.
int64_t complete_run_file_version(const std::string& path);

struct SweepIndexEntry {
  std::string id, status, error, overrides;  // status: complete | failed | pending | outdated
  std::string run_file;                      // relative to the index file's folder
};
// The sweep index: /runs/<id> external links to every complete run file's root, and
// /table/{id, status, error, overrides}; written atomically like a run file.
void write_sweep_index(const std::string& path, const std::string& sweep_name,
                       const std::vector<SweepIndexEntry>& entries);
// Copies the checkpoint of a run file into `model` (same config); names and shapes must
// match. step >= 0 but the final one: the snapshot of that step (output.keep_checkpoints)
// instead; the error lists the steps kept.
void load_checkpoint(const std::string& path, torch::nn::Module& model, int64_t step = -1);
// The same from a record read with its checkpoint (read_run_file) of the file at `path`.
void load_checkpoint(const RunRecord& record, const std::string& path, torch::nn::Module& model, int64_t step = -1);

}  // namespace pelab
