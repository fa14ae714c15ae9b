// The trainer: optimizer and schedule, length curriculum, gradient clipping, progress,
// and evaluation at test lengths. Reproducible on the CPU: the same config and seed give
// the same loss curve.
#pragma once

#include <torch/torch.h>

#include "core/train/adam.h"
#include "core/train/autocast.h"
#include "core/train/cuda_graph_step.h"
#include "core/train/evaluator.h"
#include "core/train/metrics.h"
#include "core/train/progress.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/analysis/attention_summary.h"
#include "core/analysis/probes.h"
#include "core/encodings/position_sampler.h"
#include "core/config/config.h"
#include "core/io/results.h"
#include "core/model/encoder.h"
#include "data/task.h"

namespace pelab {

// Where training stands: the step, the curve so far, the log_every window in progress and
// the counters. With the model, the optimizer and the RNG streams it is what a checkpoint
// stores (checkpoint.h).
struct TrainerProgress {
  int64_t step = 0;  // optimizer steps done (skipped ones included)
  TrainingCurve curve;
  double window_loss = 0, window_accuracy = 0, window_tokens = 0, window_seconds = 0;  // sums over
  int64_t window_steps = 0;                                                           //   the window
  double training_seconds = 0, total_tokens = 0;
  std::vector<EvalResult> evaluation_curve;  // eval.every rows so far
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, torch::Tensor>>>> snapshots;  // keep_checkpoints
  int64_t gradient_steps = 0;  // of the first train.unused_parameters_steps steps, those not skipped
};

struct TrainingCheckpoint;

// The seed of the training batches' stream (evaluation's: evaluation_data_seed, evaluator.h).
uint64_t training_data_seed(int64_t run_seed);

class Trainer {
 public:
  Trainer(const RunConfig& config, Encoder model, const Task& task, torch::Device device);

  // Runs the optimizer steps left up to train.steps (all of them, unless restored from a
  // checkpoint). A non-finite loss or gradient throws (naming the step, the loss, the
  // gradient norm and the parameters whose gradients are not finite), or with
  // train.nonfinite: skip leaves the parameters unchanged and counts the step. After the
  // first train.unused_parameters_steps steps, a parameter whose gradient was missing or
  // exactly zero at each of them is named: an error (train.unused_parameters: error) or a
  // warning in the log. Every eval.every steps it evaluates into the evaluation curve; at
  // output.keep_checkpoints steps it keeps the parameters. A stop signal (stop_signal.h)
  // ends it after the current step: checkpoint, then RunInterrupted.
  TrainingCurve train(std::ostream& log, bool interactive);
  // Same, up to step `until` (< train.steps: the run is not finished).
  TrainingCurve train_until(int64_t until, std::ostream& log, bool interactive);

  // Checkpoints to `path` every `every` steps (0: only at a stop signal) and when training ends.
  void enable_checkpoints(std::string path, int64_t every);
  // The whole training state now, and a trainer made from the same config taking it over.
  TrainingCheckpoint checkpoint() const;
  void restore(const TrainingCheckpoint& checkpoint);
  void write_checkpoint() const;  // to the enable_checkpoints path
  // Throws RunInterrupted (naming the checkpoint) when a stop signal has arrived; between
  // steps, evaluation lengths and the phases after training.
  void stop_if_requested() const;
  const TrainerProgress& progress() const { return progress_; }
  // Evaluation, maps and probes of the model as it stands (evaluator.h), at the step trained so far.
  Evaluator& evaluator();
  // The position tables' rows updated by training so far.
  std::vector<TrainedRows> trained_rows() const { return evaluator_.trained_rows(); }

  double training_seconds() const { return progress_.training_seconds; }
  // Tokens (input + placeholders) per second over the whole training.
  double tokens_per_second() const { return progress_.total_tokens / std::max(1e-9, progress_.training_seconds); }

 private:
  // bf16 autocast on the run's device for a forward pass when `precision: bf16`, else nothing
  AutocastScope autocast() const { return AutocastScope(config_.precision == "bf16", device_); }
  // After a backward pass: which parameters and table rows got a nonzero gradient.
  void record_gradients(int64_t step, const std::vector<torch::Tensor>& parameters);
  void check_unused_parameters(std::ostream& log);  // train.unused_parameters (records zero ones in the curve)
  void evaluate_curve_point();  // eval.every
  // The curves so far beside the checkpoint (core/io/live_curve.h); a failed write is a warning.
  void write_live_curve_file(std::ostream& log);
  bool live_curve_warned_ = false;
  // One training step as the host sees it. With train.sync_every > 1 the step's values stay
  // on the device (device_*) until settle_pending reads a batch of steps back at once.
  struct StepRecord {
    int64_t step = 0, length = 0, tokens = 0;
    double learning_rate = 0;
    std::chrono::steady_clock::time_point start;
    double loss = 0, gradient_norm = 0, seconds = 0;
    int64_t correct_tokens = 0, scored_tokens = 0;
    bool skipped = false;  // train.nonfinite: skip
    torch::Tensor device_loss, device_gradient_norm, device_counts;
  };
  int64_t sync_every() const;  // steps between read-backs (train.sync_every, resolved)
  // train.cuda_graphs: runs the step as a CUDA graph of its key (cuda_graph_step.h), or for
  // a key's first step eagerly with reads back from the device made errors; fills `record`'s
  // device values. false: the step must run eagerly (the key cannot be captured, or the
  // optimizer's step counts differ between parameters), nothing done.
  // `padding`: the batch's, or undefined when no token is padding.
  bool graph_step(StepRecord& record, const Batch& batch, const torch::Tensor& padding, const Positions& positions,
                  const std::vector<torch::Tensor>& parameters, std::ostream& log);
  // The forward pass (under autocast: backward follows its dtypes) scored (score_batch).
  BatchScore forward_and_score(const Batch& batch, const torch::Tensor& padding, const Positions& positions,
                               bool read_counts);
  // After backward: the global gradient norm, the gradients clipped to train.grad_clip first
  // when it is set; a scalar on the device.
  torch::Tensor clip_or_measure(const std::vector<torch::Tensor>& parameters) const;
  void account(const StepRecord& record, ProgressReporter& progress);
  void settle_pending(ProgressReporter& progress);
  std::vector<std::string> parameter_names() const;
  std::string nonfinite_gradients() const;  // names of parameters whose gradient is not finite
  std::string nonfinite_tensors(bool gradients) const;  // parameters (or gradients) not finite; empty: none
  // The positions of a training batch (still on the host) on the run's device: the task's
  // own, offset with the random_offset sampler by one uniform draw in [0, L_max - largest]
  // per batch; else the sampler's.
  Positions training_positions(const Batch& host_batch);

  RunConfig config_;
  PositionSampler sampler_;
  Encoder model_;
  const Task& task_;
  torch::Device device_;
  Evaluator evaluator_;
  AdamStep optimizer_;
  std::vector<StepRecord> pending_;  // steps not read back yet
  Rng data_rng_, position_rng_;  // the training batches' streams
  TrainerProgress progress_;
  struct GraphEntry {        // train.cuda_graphs, per step key
    bool probed = false;     //   its first step ran eagerly without reading anything back
    bool eager = false;      //   it cannot be captured: always eager
    std::unique_ptr<CudaGraphStep> graph;
  };
  bool use_graphs_ = false;
  std::unique_ptr<SideStream> graph_stream_;  // every step of a graphed run
  std::map<std::string, GraphEntry> graphs_;
  const CudaGraphStep* graph_pool_owner_ = nullptr;  // the first graph: the others share its memory pool
  int64_t graph_replays_ = 0;
  // (parameters,) uint8 on the device: what the first train.unused_parameters_steps gave each
  static constexpr uint8_t kGradientNone = 0, kGradientZero = 1, kGradientNonzero = 2;
  torch::Tensor gradient_seen_;
  std::string checkpoint_path_;
  int64_t checkpoint_every_ = 0;
};

}  // namespace pelab
