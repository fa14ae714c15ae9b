// The curves of a run still training, on disk for plot_training.py and pelab.runfile
// (docs/run-files.md, "While a run trains"): <output.dir>/curve.json, rewritten (atomically)
// at every training-curve row and evaluation-curve point, removed once run.h5 holds them.
#pragma once

#include <string>
#include <vector>

#include "core/io/results.h"

namespace pelab {

constexpr const char* kLiveCurveFileName = "curve.json";

struct LiveCurve {
  std::string run_name, config_yaml;
  int64_t train_min_length = 0, train_max_length = 0;
  std::string run_sampler = "contiguous";  // the rows' sampler settings (evaluation_sampler)
  int64_t run_positions_max_length = 0;
  int64_t steps = 0;                        // train.steps
};

// Writes `path`: the run's settings above, the training curve and the evaluation curve as
// JSON arrays under the run file's dataset names.
void write_live_curve(const std::string& path, const LiveCurve& run, const TrainingCurve& curve,
                      const std::vector<EvalResult>& evaluation_curve);

}  // namespace pelab
