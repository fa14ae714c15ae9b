// The trainer: optimizer and schedule, length curriculum, gradient clipping, progress,
// and evaluation at test lengths. Reproducible on the CPU: the same config and seed give
// the same loss curve.
#pragma once

#include <torch/torch.h>

#include "core/train/adam.h"
#include "core/train/autocast.h"
#include "core/train/cuda_graph_step.h"
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

// Seeds of the data streams: training batches, and one evaluation set per test length
// (the same for every scheme and run with the same seed).
uint64_t training_data_seed(int64_t run_seed);

uint64_t evaluation_data_seed(int64_t run_seed, int64_t length);

// The sampler evaluation draws positions from under `positions` (positions.evaluate_with),
// and its max_length (0 for contiguous): the settings EvalResult rows record.
std::pair<std::string, int64_t> evaluation_sampler(const PositionsConfig& positions);

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
  // Evaluates every eval.extrapolation method x eval.lengths entry on eval.samples examples
  // (fewer when the task's evaluation set is smaller: text).
  std::vector<EvalResult> evaluate();
  // One row; `statistics`: with attention statistics when analysis.attention_statistics, and
  // the untrained position-table rows it uses (untrained_rows_used).
  EvalResult evaluate_length(int64_t length, int64_t samples, const std::string& method = "none",
                             bool statistics = true);
  // The training step whose parameters the rows describe (pelab eval: of the loaded checkpoint).
  void set_evaluated_step(int64_t step) { progress_.step = step; }
  // The first `count` examples of the evaluation set at `length` and the positions evaluation gives them.
  std::pair<Batch, Positions> evaluation_examples(int64_t length, int64_t count, uint64_t seed);
  // Tests: the slice budget of forward_with_statistics, in attention probabilities.
  void set_statistics_probabilities(int64_t floats) { statistics_probabilities_ = floats; }
  // The position tables' rows updated by training so far, and (pelab eval) those of a run file.
  std::vector<TrainedRows> trained_rows() const;
  void set_trained_rows(const std::vector<TrainedRows>& rows);
  // Attention maps (and score terms) of the first `examples` examples of the evaluation set at
  // `length` (the positions evaluation uses), under the extrapolation `method` (as evaluate_length).
  AttentionMaps attention_maps(int64_t length, int64_t examples, const std::string& method = "none");
  // Position probes of every layer on analysis.probe_examples sequences at `length`, under `method`.
  std::vector<ProbeResult> probes(int64_t length, const std::string& method = "none");
  // One forward pass as evaluation makes it (eval mode, no gradient, autocast as the run's
  // precision), under the extrapolation `method` stretched by the tokens' length over the
  // training length's, keeping what `request` asks for. With request.score_parts, additive
  // schemes' records of a second forward without position embeddings too (`content`); with
  // `score_terms` (score_parts implied), each layer's score terms (layer_score_terms). The maps of attention_maps and `import pelab`'s
  // forward pass (docs/python.md) are this call.
  // tokens, padding (undefined: none), segments (undefined: all 0): (B, T); positions: (B, T)
  struct Inspection {
    EncoderOutput output;
    std::vector<std::vector<ScoreTerm>> score_terms;  // layers x terms (name, (B|1, H|1, T, T))
    std::vector<AttentionRecord> content;             // the content-only forward's records, or empty
  };
  Inspection inspect(const torch::Tensor& tokens, const torch::Tensor& padding, const Positions& positions,
                     const torch::Tensor& segments, const std::string& method, ForwardRequest request,
                     bool score_terms = false);
  // The config, task, model and device it runs with.
  const RunConfig& config() const { return config_; }
  const Task& task() const { return task_; }
  Encoder& model() { return model_; }
  torch::Device device() const { return device_; }

  double training_seconds() const { return progress_.training_seconds; }
  // Tokens (input + placeholders) per second over the whole training.
  double tokens_per_second() const { return progress_.total_tokens / std::max(1e-9, progress_.training_seconds); }

 private:
  // While alive: the scheme's extrapolation `method` for sequences of `tokens` tokens
  // (stretched over the training length's tokens); then none again.
  class ExtrapolationScope {
   public:
    // `tokens`: the sequences' length in tokens
    ExtrapolationScope(Trainer& trainer, int64_t tokens, const std::string& method);
    ~ExtrapolationScope();
    ExtrapolationScope(const ExtrapolationScope&) = delete;
    ExtrapolationScope& operator=(const ExtrapolationScope&) = delete;

   private:
    PositionEncodingImpl& encoding_;
  };
  // bf16 autocast on the run's device for a forward pass when `precision: bf16`, else nothing
  AutocastScope autocast() const { return AutocastScope(config_.precision == "bf16", device_); }
  // After a backward pass: which parameters and table rows got a nonzero gradient.
  void record_gradients(int64_t step, const std::vector<torch::Tensor>& parameters);
  void check_unused_parameters(std::ostream& log);  // train.unused_parameters (records zero ones in the curve)
  // The rows of position tables that a forward pass over `batch` uses (a nonzero gradient)
  // and training never updated, described for EvalResult::untrained; empty: none.
  std::string untrained_rows_used(const Batch& batch, const Positions& positions);
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
  // Positions at evaluation (positions.evaluate_with): the sampler's, or contiguous.
  // The positions of an evaluation batch: the task's own (Batch::positions) as given, else
  // the sampler's (positions.evaluate_with) or 0..T-1.
  Positions evaluation_positions(const Batch& batch, Rng& position_rng);
  // The logits of an evaluation batch, with its attention statistics added to `attention`;
  // long sequences are forwarded a slice of the batch at a time (bounded memory).
  torch::Tensor forward_with_statistics(const Batch& batch, const Positions& positions,
                                        AttentionSummaryAccumulator& attention);
  // The positions of a training batch (still on the host) on the run's device: the task's
  // own, offset with the random_offset sampler by one uniform draw in [0, L_max - largest]
  // per batch; else the sampler's.
  Positions training_positions(const Batch& host_batch);

  RunConfig config_;
  PositionSampler sampler_;
  Encoder model_;
  const Task& task_;
  torch::Device device_;
  AdamStep optimizer_;
  std::vector<StepRecord> pending_;  // steps not read back yet
  Rng data_rng_, position_rng_;  // the training batches' streams
  TrainerProgress progress_;
  struct TableRows {  // a position table (PositionEncodingImpl::position_tables) and its rows
    std::string parameter, row_kind;  //   updated so far, (rows,) bool on the device
    int64_t first_row_value;
    torch::Tensor table, trained;
  };
  std::vector<TableRows> tables_;
  // Attention statistics need every layer's (B, H, T, T) probabilities at once: a batch is
  // forwarded in slices of at most this many probabilities (floats, 256 MB). Beyond the training
  // lengths a whole batch's took gigabytes, and its page faults 3x the run's training time.
  int64_t statistics_probabilities_ = int64_t(1) << 26;
  bool stop_checks_ = true;  // evaluate_length stops at a stop signal (not inside a curve point)
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
