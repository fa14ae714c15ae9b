// The pelab command: `pelab train CONFIG`, `pelab list`. See README.md.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "experiments/bench.h"
#include "experiments/commands.h"
#include "pelab_version.h"

int main(int argc, char** argv) {
  CLI::App app{"pelab: compare position encodings in transformers"};
  app.set_version_flag("--version", std::string("pelab ") + PELAB_VERSION + " (" + PELAB_GIT_COMMIT + ")");
  app.require_subcommand(1);

  pelab::TrainArguments train;
  CLI::App* train_cmd = app.add_subcommand("train", "train and evaluate one run described by a YAML config");
  train_cmd->add_option("config", train.config_path, "run config (YAML), e.g. configs/quickstart.yaml")->required();
  train_cmd->add_option("--set", train.overrides, "override a config value: key.path=value (repeatable)")
      ->type_name("KEY=VALUE")->allow_extra_args(false);
  train_cmd->add_option("--out", train.out_dir, "output directory (overrides output.dir)");

  CLI::App* list_cmd = app.add_subcommand("list", "list position encodings and tasks with their options");

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
  bench_cmd->add_flag("--causal", bench.causal, "causal attention");
  bench_cmd->add_option("--csv", bench.csv, "also write the table as CSV");
  bench_cmd->add_flag("--worker", bench_worker, "internal: measure one scheme in this process")->group("");
  bench_cmd->add_option("--scheme", bench_scheme, "internal: the scheme a worker measures")->group("");

  CLI11_PARSE(app, argc, argv);
  if (train_cmd->parsed()) return pelab::command_train(train, std::cout, std::cerr);
  if (list_cmd->parsed()) pelab::command_list(std::cout);
  if (bench_cmd->parsed()) {
    if (bench_worker) return pelab::command_bench_worker(bench, bench_scheme, bench.lengths.at(0), std::cout);
    // the children are this same binary (resolved now: in the shell, /proc/self is the shell)
    return pelab::command_bench(bench, std::filesystem::read_symlink("/proc/self/exe").string(), std::cout);
  }
  return 0;
}
