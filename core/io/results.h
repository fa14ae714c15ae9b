// What a run produces, as the run file stores it (core/io/hdf5_store.h): the training
// curve and the evaluation rows. The trainer fills them in, the run file stores them.
#pragma once

#include <cmath>  // NAN

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/attention_summary.h"

namespace pelab {

struct TrainingCurve {  // one row every train.log_every steps, averaged over those steps
  std::vector<int64_t> step;
  std::vector<double> loss, accuracy, learning_rate, tokens_per_second;
  std::vector<int64_t> phase;  // 0-based train.phases phase of the row's last step (0 without phases)
  int64_t skipped_steps = 0;  // steps with a non-finite loss or gradient, skipped (train.nonfinite: skip)
  // Parameters whose gradient was exactly zero at each of the first train.unused_parameters_steps
  // steps although the forward pass reached them (a warning, not an error: sparse, not dead)
  std::vector<std::string> zero_gradient_parameters;
};

struct EvalResult {
  std::string method = "none"; // evaluation-time extrapolation: none | interpolation | ntk
  int64_t length = 0;          // task input length
  int64_t sequence_length = 0; // tokens per example (input + placeholders, or + separator + output)
  int64_t samples = 0;         // examples (text: windows) evaluated
  double loss = 0;             // nats per scored token
  double per_token_accuracy = 0;
  double per_sequence_accuracy = 0;
  // The best input-independent prediction on the same examples (ChanceLevel, metrics.h).
  double chance_token_accuracy = 0;
  double chance_sequence_accuracy = 0;
  double chance_loss = 0;
  // The position-free baseline on the same examples (Batch::position_free: the input's most
  // frequent symbol at every output slot), NaN where the task has none (or in older files)
  double position_free_token_accuracy = NAN;
  double position_free_sequence_accuracy = NAN;
  // The task's evaluation condition and its value (passkey: depth, flip_flop: p_ignore; from
  // eval.depths / eval.p_ignore), or "" (and 0): the training distribution.
  std::string condition;
  double condition_value = 0;
  AttentionSummary attention;  // per layer and head, when analysis.attention_statistics
  // The settings the row was made under besides method, length and samples: the training
  // step evaluated and the position sampler used (max_length 0 for contiguous).
  int64_t step = 0;
  std::string sampler = "contiguous";
  int64_t positions_max_length = 0;
  // Position-table rows (of learned, relative and bucket schemes) this evaluation used that
  // no training step updated, as "scheme: kind rows a-b never trained"; empty: none.
  std::string untrained;
  // Two rows made under the same settings (pelab eval replaces such a row, and only such).
  bool same_settings(const EvalResult& other) const {
    return method == other.method && length == other.length && samples == other.samples && step == other.step &&
           condition == other.condition && condition_value == other.condition_value &&
           sampler == other.sampler && positions_max_length == other.positions_max_length;
  }
};

// Which rows of a position table (a learned, relative-offset or bucket table) training
// updated: trained[r] is 1 when some step gave row r a nonzero gradient.
struct TrainedRows {
  std::string parameter;         // the model's parameter name, e.g. position_encoding.table
  std::string row_kind;          // position | offset | bucket
  int64_t first_row_value = 0;   // the position, offset or bucket of row 0
  std::vector<uint8_t> trained;  // (rows,)
};

// `rows` with `added` merged in: an added row replaces the row made under the same settings
// (EvalResult::same_settings), else it is appended; the order is kept.
std::vector<EvalResult> merge_evaluation_rows(std::vector<EvalResult> rows, const std::vector<EvalResult>& added);

}  // namespace pelab
