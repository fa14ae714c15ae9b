// One run from a validated config: build task and model, train, evaluate, write the run file.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/config/yaml_reader.h"
#include "core/model/encoder.h"
#include "core/train/trainer.h"
#include "data/task.h"

namespace pelab {

// "cpu", "cuda" (an error without CUDA) or "auto" (cuda when available).
torch::Device resolve_device(const std::string& name);
// Intra-op threads: `requested`, or every core when 0.
void set_threads(int64_t requested);
// Process-wide CPU math and memory settings of every run and benchmark: denormals flushed
// to zero; glibc keeps large freed blocks for reuse (no mmap/munmap per step). Throws
// std::invalid_argument when PELAB_CPU_KERNELS names kernels this CPU cannot run.
void configure_cpu_math();
// The encoder for a config and task, seeded from config.seed.
Encoder build_model(const RunConfig& config, const Task& task);

// A config whose lengths or methods the scheme cannot take: a config error (pelab exits 2).
class LengthsDoNotFit : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// Throws LengthsDoNotFit, naming every length that does not fit and the option to change,
// when training or test lengths do not fit the scheme (a `learned` table, HF relative_key
// without clipping) or the position sampler's range, or when an extrapolation method is
// asked of a scheme without one.
void check_lengths_fit(const RunConfig& config, const Task& task, EncoderImpl& model);

struct RunOutcome {
  std::string run_file;
  TrainingCurve training;
  std::vector<EvalResult> evaluation;
  double tokens_per_second = 0;  // over the whole training
};

// Trains and evaluates; writes <output.dir>/run.h5. Progress goes to `log`. Training
// checkpoints go to <output.dir>/checkpoint.h5 (train.checkpoint_every, a stop signal, the
// end of training) and are removed once run.h5 is complete. With `resume`, a checkpoint
// there is continued (its config must match, up to name, threads, device and output.dir),
// and a complete run.h5 of the same config is left as it is. A stop signal throws
// RunInterrupted (stop_signal.h) after writing the checkpoint.
RunOutcome execute_run(const RunConfig& config, std::ostream& log, bool interactive, bool resume = false);

// What a run needs before training: threads and CPU math set, the device resolved, the
// task made and the model built on the device (initialized from config.seed).
struct PreparedRun {
  torch::Device device;
  std::unique_ptr<Task> task;
  Encoder model;
};
PreparedRun prepare_run(const RunConfig& config);

// The config stored in a run file or checkpoint (`file`: its path, for error messages), as this
// build resolves it: keys added since it was written take their defaults. ConfigError when it
// no longer parses.
RunConfig stored_run_config(const std::string& file, const std::string& stored_yaml);

// What differs between a checkpoint's or run file's stored config (`file`: for messages) and
// `config`, as config_differences; keys added to pelab since the file was written count as
// their defaults (model.embedding_scale in a run from before it existed is no difference).
std::vector<std::string> differences_from_stored(const std::string& file, const std::string& stored_yaml,
                                                 const RunConfig& config);

// Creates the output directory and writes a probe file there; std::runtime_error otherwise.
void check_output_writable(const std::string& dir);

// Default attention maps are stored only for sequences of at most this many tokens.
constexpr int64_t kDefaultAttentionMapTokens = 256;
// The lengths whose attention maps a run stores (analysis.attention_lengths, or by default
// the training max and the largest test length, each when it is at most 256 tokens).
std::vector<int64_t> attention_map_lengths(const RunConfig& config, const Task& task);

// Accuracy and chance level per test length, marking lengths beyond the training range;
// `text`: bits per byte and perplexity instead of sequence accuracy.
std::string format_evaluation_table(const std::vector<EvalResult>& results, int64_t train_max_length,
                                    bool text = false);

}  // namespace pelab
