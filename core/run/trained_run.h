// A finished run loaded back from its run file, ready to evaluate and inspect: what `pelab
// eval` and `import pelab`'s pelab.load (docs/python.md) share, so that both give the same
// numbers from the same file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/config/config.h"
#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "core/train/evaluator.h"

namespace pelab {

struct TrainedRun {
  RunRecord record;  // the run file as read (its parameters included)
  RunConfig config;  // the stored config, as `adjust` changed it
  int64_t step = 0;  // the training step whose parameters the model holds
  std::unique_ptr<PreparedRun> prepared;  // device, task and model with those parameters
  std::unique_ptr<Evaluator> evaluator;   // evaluate_length, attention_maps, probes, inspect
};

// Reads `run_file`, takes its stored config (stored_run_config), lets `adjust` change the
// settings evaluation may change (device, threads, lengths, samplers, methods: as pelab
// eval's options), builds the model with the final parameters (or those of a kept snapshot,
// `step` >= 0) and checks the lengths fit (LengthsDoNotFit). ConfigError when the file's
// config no longer parses; std::runtime_error when the file cannot be read.
TrainedRun load_trained_run(const std::string& run_file, const std::function<void(RunConfig&)>& adjust = {},
                            int64_t step = -1);

}  // namespace pelab
