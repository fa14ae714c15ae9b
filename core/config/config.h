// The run configuration: one YAML file describes a run (task, model, encoding, training,
// evaluation, output). Loading validates every key, type, range and name and reports
// problems as `file:line:col: message`. Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/options.h"

namespace pelab {

// eval.extrapolation's methods (core/encodings/rotary.h): none | interpolation | ntk | yarn | dynamic_ntk
const std::vector<std::string>& extrapolation_methods();

// What the config loader needs to know of a registry (schemes or tasks): names, help and
// declared options. The registries provide it; the loader does not depend on LibTorch.
struct CatalogEntry {
  std::string name;
  std::string description;
  std::vector<OptionSpec> options;
  bool causal_only = false;  // a scheme defined for causal attention only (xpos)
  std::vector<std::string> formats;  // a task's formats (task.format), the default first
};
using Catalog = std::vector<CatalogEntry>;

struct TaskConfig {
  std::string name = "reverse_string";  // a registered task, see `pelab list`
  std::string format;                   // encoder | causal_lm | masked_lm (the task's default when empty)
  bool bos = false;                     // a beginning-of-sequence token (causal_lm of the algorithmic tasks)
  OptionValues options;                 // the task's declared options, defaults filled in
};

struct ModelConfig {
  int64_t d_model = 64;                 // residual width
  int64_t num_layers = 2;               // encoder blocks
  int64_t num_heads = 4;                // attention heads; must divide d_model
  int64_t d_ff = 256;                   // feed-forward hidden width
  double dropout = 0.0;                 // residual and embedding dropout
  double attention_dropout = 0.0;       // dropout on attention probabilities
  std::string activation = "gelu";      // gelu | relu
  std::string norm = "pre";             // pre (pre-LN) | post (post-LN, BERT)
  bool causal = false;                  // causal (decoder-style) or bidirectional attention
  bool segment_embeddings = false;      // BERT token_type embeddings (input vs output segment)
  bool embedding_layer_norm = true;     // LayerNorm after the embedding sum, as BERT
  double embedding_init_std = 1.0;      // token table initialized N(0, std^2) (1: LibTorch's default)
  std::string embedding_scale = "none"; // none | sqrt_d_model: token embeddings times sqrt(d_model)
                                        //   (Vaswani et al.; Ruoss et al.'s code)
  double layer_norm_eps = 1e-5;
  std::string logit_scaling = "none";   // each query's attention logits times a function of n, the
                                        //   keys it sees: none | log_length (log n; Chiang and Cholak
                                        //   2022) | ssmax (s log n, s learned per head and layer;
                                        //   Nakanishi 2025); with every scheme (docs/schemes.md)
  double ssmax_init = 0.43;             // ssmax: s at initialization (Nakanishi's Figure 1 value)
  //                                       constant (logits times logit_scale) | per_head (times s
  //                                       learned per head and block from logit_scale; Wang et al.
  //                                       2024's NoPE temperature) | llama4 (times 1 + llama4_scale
  //                                       log(floor(n / llama4_floor_scale) + 1); Llama 4)
  double logit_scale = 1.0;             // constant, per_head
  double llama4_floor_scale = 8192;     // llama4 (Llama 4's floor_scale, attn_scale)
  double llama4_scale = 0.1;
  std::string logit_scaling_blocks = "all";  // all | global: only the blocks that attend globally
                                        //   (global_every; Llama 4's NoPE layers)
  // Local attention (docs/configuration.md, "Local attention"), by token index, not position:
  int64_t window = 0;                   // > 0: a query sees the keys within `window` tokens of it
                                        //   (causal: i - window < j <= i, HF's sliding_window;
                                        //   bidirectional: |i - j| < window); 0: every key
  int64_t chunk = 0;                    // > 0: a query sees the keys of its own block of `chunk`
                                        //   tokens (Llama 4's chunked attention); 0: every key
  int64_t global_every = 0;             // with window or chunk: blocks every-1, 2 every-1, ...
                                        //   attend globally (Command A: 4); 0: every block local
};

// Whether block `layer` attends locally (model.window or model.chunk, not one of global_every's).
inline bool local_block(const ModelConfig& model, int64_t layer) {
  if (model.window == 0 && model.chunk == 0) return false;
  return model.global_every == 0 || (layer + 1) % model.global_every != 0;
}

struct EncodingConfig {
  std::string name = "none";            // a registered scheme, see `pelab list`
  OptionValues options;                 // the scheme's declared options, defaults filled in
};

// Some blocks with another scheme: SmolLM3 and Llama 4 drop RoPE from every fourth layer
// (Yang et al. 2025, "RoPE to NoRoPE and Back Again").
struct EncodingMixConfig {
  int64_t every = 0;                    // blocks every-1, 2 every-1, ... use `encoding`; 0: none
  EncodingConfig encoding;              // the other scheme (none by default), options beside it
};

// A group of heads with its own scheme (encoding_heads): NAPE (Vasylenko et al. 2025) gives
// half the heads ALiBi and half none; Hard-ALiBi (Jelassi et al. 2024) some heads hard windows.
struct HeadGroupConfig {
  int64_t heads = 1;                    // num_heads: how many heads, the next ones in order
  EncodingConfig encoding;              // the group's scheme, options beside the name
};

struct PositionsConfig {
  std::string sampler = "contiguous";   // contiguous (0..T-1) | random_offset | randomized (Ruoss et al.)
                                        //   | cape | random_float (real-valued; core/encodings/position_sampler.h)
  int64_t max_length = 2048;            // L_max: random_offset, randomized and random_float draw from [0, max_length)
  std::string evaluate_with = "sampler";  // sampler | contiguous: positions used at evaluation
  double global_shift = 5.0;            // cape: Delta_max, the shift of a sequence's positions
  double local_shift = 0.5;             // cape: epsilon_max, each position's jitter (<= 0.5 keeps the order)
  double global_scaling = 1.03;         // cape: lambda_max, positions scaled by lambda, ln lambda uniform
};

// One phase of a phased schedule (train.phases): a share of the steps with its own lengths
// and curriculum, e.g. BERT's 90% of steps at 128 tokens, then 10% at 512.
struct TrainPhase {
  int64_t steps = 0;                    // the phase's steps (from `steps:` or `share:` of train.steps)
  int64_t min_length = 1, max_length = 20;
  std::string curriculum = "uniform";   // as train.curriculum, counted from the phase's first step
  int64_t increase_every = 1000, increase_by = 1;
};

struct TrainConfig {
  int64_t steps = 1000;
  int64_t batch_size = 32;
  int64_t min_length = 1;               // task input lengths of training batches, one per
  int64_t max_length = 20;              //   batch, drawn by the curriculum:
  std::string curriculum = "uniform";   // uniform in [min, max] | fixed (max) | increasing
  int64_t increase_every = 1000;        // increasing: min_length + increase_by per
  int64_t increase_by = 1;              //   increase_every steps, capped at max_length
  std::vector<TrainPhase> phases;       // empty: one phase of the keys above; else these in order,
                                        //   and min_length / max_length are their smallest / largest
  std::string optimizer = "adam";       // adam | adamw
  double learning_rate = 1e-3;          // peak learning rate
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t warmup_steps = 0;             // linear warm-up from 0 to learning_rate
  std::string schedule = "constant";    // constant | cosine (decays to min_learning_rate)
  double min_learning_rate = 0.0;
  double grad_clip = 1.0;               // global gradient norm; 0 disables clipping
  std::string nonfinite = "stop";       // a non-finite loss or gradient: stop (fail the run,
                                        //   naming the step and values) | skip (the step, counted)
  int64_t log_every = 50;               // training-curve and progress interval (steps)
  int64_t sync_every = 0;               // read the loss back every N steps (the device runs ahead
                                        //   in between); 0: every step on the CPU, 16 on a GPU;
                                        //   nonfinite: skip reads every step
  std::string cuda_graphs = "auto";     // the whole step as CUDA graphs, one per step shape:
                                        //   auto (on a GPU in fp32, unless nonfinite: skip) | on | off
  int64_t checkpoint_every = 500;       // <output.dir>/checkpoint.h5 every N steps (0: only when
                                        //   stopped by SIGINT/SIGTERM), and when training ends
  std::string unused_parameters = "error";  // a parameter whose gradient is missing or zero at each
  int64_t unused_parameters_steps = 20;     //   of the first N steps: error (fail the run) | warn
};

struct EvalConfig {
  std::vector<int64_t> lengths = {5, 10, 20, 40};  // test input lengths
  std::vector<std::string> extrapolation = {"none"};  // per length, each of extrapolation_methods()
  int64_t samples = 256;                // sequences per test length
  int64_t batch_size = 128;
  int64_t every = 0;                    // also evaluate every N training steps (0: never), into
  std::vector<int64_t> every_lengths;   //   the evaluation curve: at these lengths (empty: lengths)
  int64_t every_samples = 64;           //   on this many sequences each
  // Evaluation conditions (Task::evaluation_condition): each length is evaluated at every value
  std::vector<double> depths;           //   passkey: where the passkey sits, 0 (start) .. 1 (end)
  std::vector<double> p_ignore;         //   flip_flop: the test ignore probability
};
// The evaluation conditions a task may have (Task::evaluation_condition) and their eval
// settings: depth (eval.depths), p_ignore (eval.p_ignore).
struct EvalCondition {
  std::string name, key;                 // e.g. depth, eval.depths
  std::vector<double> EvalConfig::*values;
};
const std::vector<EvalCondition>& evaluation_conditions();
// The values of eval's setting for the task's evaluation condition `name` (empty: none given).
const std::vector<double>& condition_values(const EvalConfig& eval, const std::string& name);

struct AnalysisConfig {
  bool attention_statistics = true;     // per layer and head over all evaluation examples
  std::vector<int64_t> attention_lengths;  // maps stored for these lengths; empty: the training
                                        //   max and the largest test length, each if <= 256 tokens
  int64_t attention_examples = 4;       // examples per stored length
  bool attention_float16 = true;        // store maps as float16 (half the size)
  bool probes = true;                   // linear position probes of every layer
  std::vector<int64_t> probe_lengths;   // empty: the training max length
  int64_t probe_examples = 256;         // sequences per length: half fit the probes, half test them
  double probe_ridge = 1e-2;            // ridge penalty (x the mean feature variance)
};

struct OutputConfig {
  std::string dir = "runs/default";     // the run file is <dir>/run.h5
  std::vector<int64_t> keep_checkpoints;  // training steps whose parameters the run file keeps
                                        //   (/snapshots), for pelab eval --step
};

struct RunConfig {
  std::string name = "run";
  int64_t seed = 0;
  int64_t threads = 0;                  // intra-op threads; 0 = every core
  std::string device = "cpu";           // cpu | cuda | auto (cuda when available)
  std::string precision = "fp32";       // fp32 | bf16 (autocast: matrix products in bfloat16)
  TaskConfig task;
  ModelConfig model;
  EncodingConfig encoding;
  EncodingMixConfig encoding_mix;
  // Non-empty: the heads of every block `encoding` would serve are split into these groups
  // (heads summing to model.num_heads), each with its scheme; `encoding` stays none
  std::vector<HeadGroupConfig> encoding_heads;
  PositionsConfig positions;
  TrainConfig train;
  EvalConfig eval;
  AnalysisConfig analysis;
  OutputConfig output;
  // Top-level `schemes:`: Python files whose pelab.Scheme classes join the scheme registry for
  // this run (docs/python-schemes.md), as absolute paths (written relative to the config file).
  std::vector<std::string> scheme_files;
};

// Loads the Python files of a config's `schemes:` and registers their schemes, returning
// their catalog entries; throws std::exception with a one-line message. Installed by what
// embeds or hosts Python (the pelab command, the Python extension); without one, a config
// naming scheme files is refused.
using SchemeFileLoader = std::function<Catalog(const std::vector<std::string>& files)>;
void set_scheme_file_loader(SchemeFileLoader loader);
bool has_scheme_file_loader();
// Loads `files` (absolute or relative to the working directory) through the loader: their
// schemes' entries; a ConfigError naming the file otherwise.
Catalog load_scheme_files(const std::vector<std::string>& files);

// Loads and validates a run config. `overrides` are `key.path=value` strings, named in
// errors as `<overrides_via> key.path=value` (--set on the command line; a sweep's values).
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          const Catalog& schemes, const Catalog& tasks, const std::string& overrides_via = "--set");
// Same, from YAML text; `source_name` stands for the file in error messages.
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source_name,
                           const std::vector<std::string>& overrides, const Catalog& schemes,
                           const Catalog& tasks, const std::string& overrides_via = "--set");
// The fully resolved config (every default filled in) as YAML; parses back to the same config.
std::string to_yaml(const RunConfig& config);
// The keys that do not change what a run computes: name, threads, device, output.dir,
// train.checkpoint_every, train.sync_every and train.cuda_graphs (a resumed run takes them
// from the command line).
bool is_operational_config_key(const std::string& key);
// What differs between two resolved configs (to_yaml) that would change a run's results, as
// "key.path: A -> B" lines; the operational keys are left out.
std::vector<std::string> config_differences(const std::string& before_yaml, const std::string& after_yaml);

}  // namespace pelab
