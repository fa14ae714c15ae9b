// The pelab command: train, list, bench, sweep, eval, report, export-attention, padding (README.md, docs/).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "core/kernels/blas_core.h"
#include "experiments/bench.h"
#include "experiments/commands.h"
#include "experiments/eval.h"
#include "experiments/import_hf.h"
#include "experiments/padding.h"
#include "experiments/report.h"
#include "core/train/stop_signal.h"
#include "experiments/sweep.h"
#include "pelab_version.h"
#ifdef PELAB_EMBEDS_PYTHON
#include "core/python/scheme_bridge.h"
#endif

int main(int argc, char** argv) {
  pelab::reexec_with_best_openblas_core(argv);  // first: OpenBLAS reads its kernel choice only at load
#ifdef PELAB_EMBEDS_PYTHON
  pelab::install_python_scheme_loader(/*embedded=*/true);  // Python starts only for a config's `schemes:`
#endif
  CLI::App app{"pelab: compare position encodings in transformers"};
  // with the BLAS kernels it runs (import pelab loads the same: python/pelab/__init__.py)
  const std::string blas = pelab::openblas_core();
  app.set_version_flag("--version", std::string("pelab ") + PELAB_VERSION + " (" + PELAB_GIT_COMMIT + ")" +
                                        (blas.empty() ? std::string() : "\nOpenBLAS kernels: " + blas));
  app.require_subcommand(1);

  // An empty path would read as "not given" (the config's output.dir; no CSV; no trace).
  const CLI::Validator non_empty_path(
      [](std::string& value) { return value.empty() ? std::string("an empty path") : std::string(); }, "PATH");

  pelab::TrainArguments train;
  CLI::App* train_cmd = app.add_subcommand("train", "train and evaluate one run described by a YAML config");
  train_cmd->add_option("config", train.config_path, "run config (YAML), e.g. configs/quickstart.yaml")->required();
  train_cmd->add_option("--set", train.overrides, "override a config value: key.path=value (repeatable)")
      ->type_name("KEY=VALUE")->allow_extra_args(false);
  train_cmd->add_option("--out", train.out_dir, "output directory (overrides output.dir)")->check(non_empty_path);
  train_cmd->add_flag("--resume", train.resume,
                      "continue from <output.dir>/checkpoint.h5 if there is one (same config); a complete run "
                      "is left as it is");

  CLI::App* list_cmd = app.add_subcommand("list", "list position encodings and tasks with their options");
  bool list_yaml = false;
  list_cmd->add_flag("--yaml", list_yaml, "the same catalogs as YAML, for tools");
  std::vector<std::string> list_scheme_files;
  list_cmd->add_option("--schemes", list_scheme_files, "Python files defining schemes to list too (as a config's schemes:)")
      ->type_name("FILE.py")->delimiter(',');

  pelab::BenchOptions bench;
  bool bench_worker = false;
  std::string bench_scheme;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "training-step time and peak memory of every scheme, next to none's (each in its own process)");
  bench_cmd->add_option("--schemes", bench.schemes, "schemes to measure (default: all)")->delimiter(',');
  bench_cmd->add_option("--lengths", bench.lengths, "sequence lengths in tokens")->capture_default_str()->delimiter(',');
  bench_cmd->add_option("--d-model", bench.d_model, "model width")->capture_default_str();
  bench_cmd->add_option("--layers", bench.num_layers, "encoder blocks")->capture_default_str();
  bench_cmd->add_option("--heads", bench.num_heads, "attention heads")->capture_default_str();
  bench_cmd->add_option("--d-ff", bench.d_ff, "feed-forward width")->capture_default_str();
  bench_cmd->add_option("--batch", bench.batch, "sequences per step")->capture_default_str();
  bench_cmd->add_option("--warmup", bench.warmup, "untimed steps first")->capture_default_str();
  bench_cmd->add_option("--repeats", bench.repeats, "timed steps (the median is reported)")->capture_default_str();
  bench_cmd->add_option("--threads", bench.threads, "intra-op threads (0: every core)")->capture_default_str();
  bench_cmd->add_option("--rounds", bench.rounds, "rounds; each measures none right before every scheme, and x none is "
                        "the median of those paired ratios")->capture_default_str()->check(CLI::PositiveNumber);
  bench_cmd->add_flag("--causal", bench.causal, "causal attention");
  bench_cmd->add_option("--attention-dropout", bench.attention_dropout, "dropout on the attention probabilities "
                        "(model.attention_dropout)")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  bench_cmd->add_option("--device", bench.device, "cpu, cuda or auto (cuda when available)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  bench_cmd->add_option("--precision", bench.precision, "fp32, or bf16 (autocast; the peak is then bfloat16's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  bench_cmd->add_option("--scheme-files", bench.scheme_files, "Python files defining schemes to measure too")
      ->type_name("FILE.py")->delimiter(',');
  bench_cmd->add_option("--csv", bench.csv, "also write the table as CSV")->check(non_empty_path);
  bench_cmd->add_option("--trace", bench.trace, "with one scheme and one length: profile one more step in the worker "
                        "and write LibTorch's Chrome trace (chrome://tracing, Perfetto) here")
      ->check(non_empty_path);
  bench_cmd->add_flag("--worker", bench_worker, "internal: measure one scheme in this process")->group("");
  bench_cmd->add_option("--scheme", bench_scheme, "internal: the scheme a worker measures")->group("");

  pelab::SweepArguments sweep;
  CLI::App* sweep_cmd = app.add_subcommand(
      "sweep", "run a sweep (schemes x tasks x lengths x seeds) locally in parallel, or as a Slurm job array");
  sweep_cmd->add_option("sweep", sweep.sweep_path, "sweep file (YAML), e.g. configs/sweeps/quickstart.yaml")
      ->required();
  sweep_cmd->add_option("--jobs,-j", sweep.jobs, "processes at once (each trains --runs-per-process runs)")
      ->capture_default_str()->check(CLI::PositiveNumber)
      ->each([&sweep](const std::string&) { sweep.jobs_set = true; });
  sweep_cmd->add_option("--gpus", sweep.gpus, "place the runs on these GPUs (each process gets CUDA_VISIBLE_DEVICES "
                        "of one), --runs-per-gpu on each at once")->delimiter(',')->check(CLI::NonNegativeNumber);
  sweep_cmd->add_option_function<std::string>(
      "--runs-per-gpu",
      [&sweep](const std::string& value) {
        if (value == "auto") {
          sweep.runs_per_gpu_auto = true;
          sweep.runs_per_gpu = pelab::kAutoRunsPerGpu;
        } else {
          sweep.runs_per_gpu = std::stoll(value);
        }
      },
      "with --gpus: runs at once on each GPU, packed in one process per GPU unless --runs-per-process says "
      "otherwise; auto: " + std::to_string(pelab::kAutoRunsPerGpu))
      ->check(CLI::IsMember({"auto"}) | CLI::Range(1, 1024));
  sweep_cmd->add_option("--runs-per-process", sweep.runs_per_process, "runs trained in one process, each on its own "
                        "thread (and CUDA stream); default 1, or --runs-per-gpu with --gpus")
      ->check(CLI::Range(1, 1024));
  sweep_cmd->add_flag("--in-process", sweep.in_process, "internal: train the --run-index runs in this process")
      ->group("");
  sweep_cmd->add_option("--set", sweep.set, "KEY=VALUE added to the sweep file's set for every run, after it "
                        "(repeatable; give the same again to resume the sweep)")
      ->type_name("KEY=VALUE")->allow_extra_args(false);
  sweep_cmd->add_option("--output", sweep.output, "the sweep's folder, instead of the sweep file's output")
      ->check(non_empty_path);
  sweep_cmd->add_option("--threads", sweep.threads, "threads per run (default: cores / runs at once)");
  sweep_cmd->add_flag("--dry-run", sweep.dry_run, "list the runs, their ids and state (changed: complete, but trained with another config; then exit 1); run nothing");
  sweep_cmd->add_option("--run-index", sweep.run_indices, "run only these runs, side by side (what a Slurm array "
                        "task does)")->delimiter(',')->check(CLI::NonNegativeNumber);
  sweep_cmd->add_option("--only", sweep.only, "only the runs with this axis value, e.g. --only seed=0 --only seed=1 "
                        "(a key given again: any of its values; keys: all of them); a part of the grid, in the "
                        "grid's folder")->type_name("KEY=VALUE")->allow_extra_args(false);
  sweep_cmd->add_option("--skip-runs-in", sweep.skip_runs_in, "leave out the runs this per-run file (an earlier "
                        "report's report_runs.csv) holds: parts trained elsewhere, merged by their rows (trained with this "
                        "sweep's settings, task and steps, or refused)")
      ->check(CLI::ExistingFile);
  sweep_cmd->add_flag("--slurm", sweep.slurm, "write an sbatch job array for the runs not complete, and submit it");
  sweep_cmd->add_flag("--no-submit", sweep.no_submit, "with --slurm: write the script only");
  auto slurm_option = [&](const char* name, auto& target, bool& set, const char* help) {
    sweep_cmd->add_option(name, target, help)->each([&set](const std::string&) { set = true; })->group("Slurm");
  };
  slurm_option("--partition", sweep.slurm_overrides.partition, sweep.partition_set, "Slurm partition");
  slurm_option("--time", sweep.slurm_overrides.time, sweep.time_set, "time limit per run, e.g. 01:00:00");
  slurm_option("--cpus", sweep.slurm_overrides.cpus_per_task, sweep.cpus_set, "CPUs per run");
  slurm_option("--gpus-per-task", sweep.slurm_overrides.gpus, sweep.gpus_set, "GPUs per array task");
  slurm_option("--mem", sweep.slurm_overrides.mem, sweep.mem_set, "memory per run, e.g. 4G");
  slurm_option("--runs-per-task", sweep.slurm_overrides.runs_per_task, sweep.runs_per_task_set,
               "runs side by side in each array task, sharing its GPUs (the task asks for N x the CPUs and memory "
               "per run)");

  const auto positive_lengths = CLI::Range(int64_t(1), int64_t(1) << 24);
  pelab::EvalArguments eval;
  CLI::App* eval_cmd = app.add_subcommand(
      "eval", "evaluate a finished run (or every complete run of a sweep) at new settings; adds the rows to its run "
              "file, each with the settings that made it");
  eval_cmd->add_option("target", eval.target, "a run.h5, or a sweep directory")->required();
  eval_cmd->add_option("--lengths", eval.lengths, "test lengths (default: the run's eval.lengths, unless only "
                       "--probes or --attention-lengths are given)")->delimiter(',')->check(positive_lengths);
  eval_cmd->add_option("--samples", eval.samples, "sequences per length (default: the run's eval.samples)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  eval_cmd->add_option("--sampler", eval.sampler, "position sampler (default: the run's)")
      ->check(CLI::IsMember({"contiguous", "random_offset", "randomized", "cape", "random_float"}));
  eval_cmd->add_option("--sampler-max-length", eval.sampler_max_length,
                       "the sampler's max_length (default: the run's positions.max_length)")
      ->check(positive_lengths);
  eval_cmd->add_option("--extrapolation", eval.extrapolation, "none, interpolation, ntk, yarn, dynamic_ntk, rerope, leaky_rerope "
                       "(default: the run's eval.extrapolation)")->delimiter(',')->check(CLI::IsMember(pelab::extrapolation_methods()));
  eval_cmd->add_option("--depths", eval.depths, "passkey: evaluate every length at these depths, 0 (start) to 1 "
                       "(end) (default: the run's eval.depths)")->delimiter(',')->check(CLI::Range(0.0, 1.0));
  eval_cmd->add_option("--p-ignore", eval.p_ignore, "flip_flop: evaluate every length at these ignore "
                       "probabilities (default: the run's eval.p_ignore)")->delimiter(',')->check(CLI::Range(0.0, 0.999));
  eval_cmd->add_option("--probes", eval.probes, "position probes at these lengths")->delimiter(',')
      ->check(positive_lengths);
  eval_cmd->add_option("--attention-lengths", eval.attention_lengths, "store attention maps at these lengths")
      ->delimiter(',')->check(positive_lengths);
  eval_cmd->add_option("--examples", eval.attention_examples, "examples per attention map length")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eval_cmd->add_flag("--float32", eval.float32, "attention maps in float32 (default float16)");
  eval_cmd->add_option("--step", eval.step, "evaluate the parameters kept at this step (output.keep_checkpoints) "
                       "instead of the final ones")->check(CLI::NonNegativeNumber);
  eval_cmd->add_option("--device", eval.device, "cpu, cuda or auto")->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  eval_cmd->add_option("--threads", eval.threads, "threads per run (0: every core; a sweep: cores / jobs)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 12));
  eval_cmd->add_option("--jobs,-j", eval.jobs, "a sweep: runs at once")->capture_default_str()
      ->check(CLI::PositiveNumber);
  eval_cmd->add_flag("--force", eval.force, "recompute rows the run file already has under these settings");

  pelab::PaddingArguments padding;
  CLI::App* padding_cmd = app.add_subcommand(
      "padding", "whether the padding token's embedding row matters: a finished run's logits at real tokens with "
                 "padding appended, its row zero, random or huge, with and without the attention mask");
  padding_cmd->add_option("run_file", padding.run_file, "a run.h5 written by pelab train")->required();
  padding_cmd->add_option("--length", padding.length, "input length (default: the run's train.max_length)")
      ->check(CLI::Range(1, 1 << 24));
  padding_cmd->add_option("--pad", padding.pad, "padding tokens appended (default: as many as the sequence has)")
      ->check(CLI::Range(1, 1 << 24));
  padding_cmd->add_option("--examples", padding.examples, "evaluation examples")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  padding_cmd->add_option("--csv", padding.csv, "also write the table to this CSV file");

  pelab::EvalArguments export_attention;
  CLI::App* export_cmd = app.add_subcommand(
      "export-attention", "store attention maps of a finished run (from its checkpoint) in its run file (pelab eval "
                          "--attention-lengths)");
  export_cmd->add_option("run_file", export_attention.target, "a run.h5 written by pelab train")->required();
  export_cmd->add_option("--lengths", export_attention.attention_lengths, "test lengths")
      ->delimiter(',')
      ->required()
      ->check(CLI::Range(1, 1 << 24));
  export_cmd->add_option("--examples", export_attention.attention_examples, "evaluation examples per length")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  export_cmd->add_flag("--float32", export_attention.float32, "store float32 (default float16)");
  export_cmd->add_option("--threads", export_attention.threads, "threads (0: every core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 12));

  pelab::ReportArguments report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "the length-generalization table of a sweep: each group's seeds aggregated per test length and "
                "over the lengths beyond its training, with the spread and the chance level");
  report_cmd->add_option("paths", report.paths, "sweep directories, run files (run.h5) and per-run files (an earlier "
                         "report's report_runs.csv), any mix; a run file is a group of its own, named by its run "
                         "name")->required();
  report_cmd->add_option("--out", report.out_dir, "folder for report.csv, report.md and report_runs.csv (default: "
                         "the sweep directory when one is given alone, the files named by the options that differ "
                         "from the defaults: report_aggregate-median.csv)")->check(non_empty_path);
  report_cmd->add_option("--metric", report.metric, "token | sequence | loss")->capture_default_str()
      ->check(CLI::IsMember({"token", "sequence", "loss"}));
  report_cmd->add_option("--aggregate", report.aggregate, "over seeds: mean (+- std), median [interquartile "
                         "range], median-ci (median [the order-statistic interval that holds it with 95%, from 6 seeds]), max "
                         "(the best seed [the worst])")
      ->capture_default_str()->check(CLI::IsMember({"mean", "median", "median-ci", "max"}));
  report_cmd->add_option("--pool", report.pool, "axis keys pooled with the seeds, e.g. train.learning_rate (with "
                         "--aggregate max: the best over seeds and learning rates, as Ruoss et al. report)")
      ->delimiter(',');
  report_cmd->add_option("--learned", report.learned, "a run below this accuracy (a fraction, in --learned-metric) "
                         "at its longest training length has not learned its task: flagged, its values beyond "
                         "training left out")
      ->check(CLI::NonNegativeNumber);
  report_cmd->add_option("--learned-metric", report.learned_metric, "what --learned judges: per-token or "
                         "per-sequence (exact-match) accuracy")
      ->capture_default_str()
      ->check(CLI::IsMember({"token", "sequence"}));
  report_cmd->add_option("--success", report.success, "also count the seeds at or above this accuracy (a fraction, "
                         "e.g. 0.9; loss: at or below) per cell, as k/n")->check(CLI::NonNegativeNumber);
  report_cmd->add_option("--format", report.format, "what is printed: text, markdown, csv or latex (the .csv "
                         "and .md files are written either way)")->capture_default_str()
      ->check(CLI::IsMember({"text", "markdown", "csv", "latex"}));
  report_cmd->add_option("--sort", report.sort, "none (the sweep's order) or summary (best first by the "
                         "beyond-training column, within each task)")->capture_default_str()->check(CLI::IsMember({"none", "summary"}));
  report_cmd->add_option("--method", report.method, "only this extrapolation method's rows (default: each method a "
                         "line)")->check(CLI::IsMember(pelab::extrapolation_methods()));
  report_cmd->add_option("--step", report.step, "rows of this training step (pelab eval --step; default: the "
                         "final step)")->check(CLI::NonNegativeNumber);
  report_cmd->add_option("--sampler", report.sampler, "rows made with this position sampler (pelab eval --sampler; "
                         "default: each run's own)")->check(CLI::IsMember({"contiguous", "random_offset", "randomized", "cape", "random_float"}));
  report_cmd->add_option("--sampler-max-length", report.sampler_max_length, "rows with this sampler max_length")
      ->check(CLI::PositiveNumber);
  report_cmd->add_option("--samples", report.samples, "rows of this many samples (default: the most there are)")
      ->check(CLI::PositiveNumber);

  pelab::ImportHfArguments import_hf;
  CLI::App* import_cmd = app.add_subcommand(
      "import-hf", "an HF BERT checkpoint (config.json with model.safetensors or pytorch_model.bin; position types "
                   "absolute, relative_key, relative_key_query) as a pelab run file, for pelab eval, export-attention, "
                   "the probes and import pelab (docs/import-hf.md)");
  import_cmd->add_option("dir", import_hf.dir, "the checkpoint's folder (save_pretrained's)")->required()
      ->check(CLI::ExistingDirectory);
  import_cmd->add_option("--name", import_hf.options.name, "the run name (default: hf-<the folder's name>)");
  import_cmd->add_option("--out", import_hf.options.output_dir, "the run file's folder (default: runs/<name>)")
      ->check(non_empty_path);
  import_cmd->add_option("--train-length", import_hf.options.train_length, "tokens per sequence the checkpoint was "
                         "trained at, [CLS] and [SEP] included, for the report's beyond-training columns (default: "
                         "max_position_embeddings)")->check(positive_lengths);
  import_cmd->add_option("--lengths", import_hf.options.eval_lengths, "the run's eval.lengths: input lengths, without "
                         "[CLS] and [SEP], as pelab eval's (default: 16, 32, ... tokens up to max_position_embeddings)")
      ->delimiter(',')->check(positive_lengths);
  import_cmd->add_option("--samples", import_hf.options.eval_samples, "the run's eval.samples")->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  import_cmd->add_flag("--force", import_hf.force, "replace a run file that is there");

  pelab::CheckSchemeArguments check;
  CLI::App* check_cmd = app.add_subcommand(
      "check-scheme", "the registry-wide property tests on one scheme, built-in or Python: a table, exit 1 on a failure");
  check_cmd->add_option("scheme", check.scheme, "the scheme's registered name")->required();
  check_cmd->add_option("--schemes", check.scheme_files, "Python files defining schemes (as a config's schemes:)")
      ->type_name("FILE.py")->delimiter(',');
  check_cmd->add_option("--set", check.overrides, "an option of the scheme (base=500) or any key.path=value (repeatable)")
      ->type_name("KEY=VALUE")->allow_extra_args(false);
  check_cmd->add_option("--mode", check.mode, "attention modes to check")
      ->check(CLI::IsMember({"both", "bidirectional", "causal"}))->capture_default_str();
  check_cmd->add_flag("--randomized,!--no-randomized", check.randomized,
                      "also with Ruoss et al.'s randomized positions (default: yes)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (argc > 1 && argv[1][0] != '-' && std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::cerr << "pelab: unknown subcommand '" << argv[1] << "'; subcommands: " << pelab::join(names) << "\n";
      return 2;
    }
    // --help and --version exit 0; a wrong or missing argument 2, as an invalid config
    return app.exit(e) == 0 ? 0 : 2;
  }
  // train and sweep stop gracefully on SIGINT/SIGTERM (checkpoint, exit 75): from here on,
  // before the config is read, so that an early signal is not lost
  if (train_cmd->parsed() || sweep_cmd->parsed() || eval_cmd->parsed()) pelab::install_stop_handlers();
  const auto self = [] { return std::filesystem::read_symlink("/proc/self/exe").string(); };
  if (sweep_cmd->parsed())
    return pelab::command_sweep(sweep, std::filesystem::read_symlink("/proc/self/exe").string(), std::cout, std::cerr);
  if (report_cmd->parsed()) return pelab::command_report(report, std::cout, std::cerr);
  if (eval_cmd->parsed()) return pelab::command_eval(eval, self(), std::cout, std::cerr);
  if (export_cmd->parsed()) {
    if (std::filesystem::is_directory(export_attention.target)) {
      std::cerr << "error: export-attention takes a run file; for a sweep use pelab eval --attention-lengths\n";
      return 2;
    }
    return pelab::command_eval(export_attention, self(), std::cout, std::cerr);
  }
  if (padding_cmd->parsed()) return pelab::command_padding(padding, std::cout, std::cerr);
  if (train_cmd->parsed()) return pelab::command_train(train, std::cout, std::cerr);
  if (import_cmd->parsed()) return pelab::command_import_hf(import_hf, std::cout, std::cerr);
  if (check_cmd->parsed()) return pelab::command_check_scheme(check, std::cout, std::cerr);
  if (list_cmd->parsed()) return pelab::command_list(std::cout, std::cerr, list_yaml, list_scheme_files);
  if (bench_cmd->parsed()) {
    if (bench_worker) return pelab::command_bench_worker(bench, bench_scheme, bench.lengths.at(0), std::cout);
    // the children are this same binary (resolved now: in the shell, /proc/self is the shell)
    return pelab::command_bench(bench, std::filesystem::read_symlink("/proc/self/exe").string(), std::cout);
  }
  return 0;
}
