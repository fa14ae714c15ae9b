#include "core/run/trained_run.h"

#include "core/train/stop_signal.h"

namespace pelab {

TrainedRun load_trained_run(const std::string& run_file, const std::function<void(RunConfig&)>& adjust,
                            int64_t step) {
  TrainedRun run;
  run.record = read_run_file(run_file);  // with the parameters: read once
  run.config = stored_run_config(run_file, run.record.config_yaml);
  if (adjust) adjust(run.config);
  run.prepared = std::make_unique<PreparedRun>(prepare_run(run.config));
  load_checkpoint(run.record, run_file, *run.prepared->model, step);
  check_lengths_fit(run.config, *run.prepared->task, *run.prepared->model);
  run.step = step >= 0 ? step : run.record.train_steps;
  run.evaluator = std::make_unique<Evaluator>(run.config, run.prepared->model, *run.prepared->task, run.prepared->device);
  run.evaluator->set_step(run.step);
  // a stop signal ends a long evaluation within a batch (pelab eval: the run file stays as it was)
  run.evaluator->set_stop_check([step = run.step] {
    if (stop_signal() != 0) throw RunInterrupted(stop_signal(), step, "");
  });
  run.evaluator->set_trained_rows(run.record.trained_rows);
  return run;
}

}  // namespace pelab
