// What a run produces, as the run file stores it (core/io/hdf5_store.h): the training
// curve and the evaluation rows. The trainer fills them in, the run file stores them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/attention_summary.h"

namespace pelab {

struct TrainingCurve {  // one row every train.log_every steps, averaged over those steps
  std::vector<int64_t> step;
  std::vector<double> loss, accuracy, learning_rate, tokens_per_second;
  int64_t skipped_steps = 0;  // steps with a non-finite loss or gradient, skipped (train.nonfinite: skip)
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
  AttentionSummary attention;  // per layer and head, when analysis.attention_statistics
};

}  // namespace pelab
