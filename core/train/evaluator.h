// Evaluation of a model at test lengths, and what analysis reads from it: attention maps,
// score terms, position probes, one forward pass. The trainer evaluates through it during
// and after training; `pelab eval` and `import pelab` through it on a run loaded from its
// file (core/run/trained_run.h), so all three give the same numbers from the same model.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/attention_summary.h"
#include "core/analysis/probes.h"
#include "core/config/config.h"
#include "core/encodings/position_sampler.h"
#include "core/io/results.h"
#include "core/model/encoder.h"
#include "core/train/autocast.h"
#include "data/task.h"

namespace pelab {

// The seed of the evaluation set at one test length (the same for every scheme and run
// with the same seed).
uint64_t evaluation_data_seed(int64_t run_seed, int64_t length);
// Positions get their own stream beside each data stream, so that a sampler leaves the
// data of a seed unchanged.
uint64_t position_stream_seed(uint64_t data_seed);
// The sampler evaluation draws positions from under `positions` (positions.evaluate_with),
// and its max_length (0 for contiguous): the settings EvalResult rows record.
std::pair<std::string, int64_t> evaluation_sampler(const PositionsConfig& positions);
// flags: (n,) bool on any device -> n bytes on the host (what checkpoints and run files store)
std::vector<uint8_t> flags_on_host(const torch::Tensor& flags);

class Evaluator {
 public:
  Evaluator(const RunConfig& config, Encoder model, const Task& task, torch::Device device);

  // The training step whose parameters the rows, maps and probes describe.
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }
  // Called before every batch of an evaluation (the trainer's: a stop signal ends a long
  // evaluation within a batch); empty: no checks.
  void set_stop_check(std::function<void()> check) { stop_check_ = std::move(check); }

  // Every eval.extrapolation method x eval.lengths entry on eval.samples examples (fewer
  // when the task's evaluation set is smaller: text), at every condition_values() value.
  std::vector<EvalResult> evaluate();
  // One row; `statistics`: with attention statistics when analysis.attention_statistics, and
  // the untrained position-table rows it uses (untrained_rows_used); `condition`: the task's
  // evaluation condition at that value (Task::condition_batch), none: as in training. Every
  // value draws from the length's evaluation stream: the same inputs where only the
  // condition moves them (passkey: the same filler and keys at every depth).
  EvalResult evaluate_length(int64_t length, int64_t samples, const std::string& method = "none",
                             bool statistics = true, std::optional<double> condition = std::nullopt);
  // The values evaluation visits for the task's condition: the eval setting's, or one
  // nullopt (no condition, or none given).
  std::vector<std::optional<double>> condition_values() const;
  // The first `count` examples of the evaluation set at `length` and the positions evaluation gives them.
  std::pair<Batch, Positions> evaluation_examples(int64_t length, int64_t count, uint64_t seed);
  // Attention maps (and score terms) of the first `examples` examples of the evaluation set at
  // `length` (the positions evaluation uses), under the extrapolation `method` (as evaluate_length).
  AttentionMaps attention_maps(int64_t length, int64_t examples, const std::string& method = "none");
  // Position probes of every layer on analysis.probe_examples sequences at `length`, under `method`.
  std::vector<ProbeResult> probes(int64_t length, const std::string& method = "none");
  // One forward pass as evaluation makes it (eval mode, no gradient, autocast as the run's
  // precision), under the extrapolation `method` stretched by the tokens' length over the
  // training length's, keeping what `request` asks for. With request.score_parts, additive
  // schemes' records of a second forward without position embeddings too (`content`); with
  // `score_terms` (score_parts implied), each layer's score terms (layer_score_terms). The
  // maps of attention_maps and `import pelab`'s forward pass (docs/python.md) are this call.
  // tokens, padding (undefined: none), segments (undefined: all 0): (B, T); positions: (B, T)
  struct Inspection {
    EncoderOutput output;
    std::vector<std::vector<ScoreTerm>> score_terms;  // layers x terms (name, (B|1, H|1, T, T))
    std::vector<AttentionRecord> content;             // the content-only forward's records, or empty
  };
  Inspection inspect(const torch::Tensor& tokens, const torch::Tensor& padding, const Positions& positions,
                     const torch::Tensor& segments, const std::string& method, ForwardRequest request,
                     bool score_terms = false);

  // The position tables' rows (learned, relative and bucket schemes) training updated:
  // after a backward pass, those with a nonzero gradient join them; and as stored.
  void mark_trained_rows();
  std::vector<TrainedRows> trained_rows() const;
  void set_trained_rows(const std::vector<TrainedRows>& rows);
  // Tests: the slice budget of forward_with_statistics, in attention probabilities.
  void set_statistics_probabilities(int64_t floats) { statistics_probabilities_ = floats; }

  const RunConfig& config() const { return config_; }
  const Task& task() const { return task_; }
  Encoder& model() { return model_; }
  torch::Device device() const { return device_; }

 private:
  // While alive: the scheme's extrapolation `method` for sequences of `tokens` tokens
  // (stretched over the training length's tokens); then none again.
  class ExtrapolationScope {
   public:
    ExtrapolationScope(Evaluator& evaluator, int64_t tokens, const std::string& method);
    ~ExtrapolationScope();
    ExtrapolationScope(const ExtrapolationScope&) = delete;
    ExtrapolationScope& operator=(const ExtrapolationScope&) = delete;

   private:
    PositionEncodingImpl& encoding_;
  };
  // bf16 autocast on the run's device for a forward pass when `precision: bf16`, else nothing
  AutocastScope autocast() const { return AutocastScope(config_.precision == "bf16", device_); }
  // The rows of position tables that a forward pass over `batch` uses (a nonzero gradient)
  // and training never updated, described for EvalResult::untrained; empty: none.
  std::string untrained_rows_used(const Batch& batch, const Positions& positions);
  // The positions of an evaluation batch: the task's own (Batch::positions) as given, else
  // the sampler's (positions.evaluate_with) or 0..T-1.
  Positions evaluation_positions(const Batch& batch, Rng& position_rng);
  // The logits of an evaluation batch, with its attention statistics added to `attention`;
  // long sequences are forwarded a slice of the batch at a time (bounded memory).
  torch::Tensor forward_with_statistics(const Batch& batch, const Positions& positions,
                                        AttentionSummaryAccumulator& attention);

  RunConfig config_;
  PositionSampler sampler_;
  Encoder model_;
  const Task& task_;
  torch::Device device_;
  int64_t step_ = 0;
  std::function<void()> stop_check_;
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
};

}  // namespace pelab
