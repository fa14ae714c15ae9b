// The pelab command: `pelab train CONFIG`, `pelab list`. See README.md.
#include <CLI/CLI.hpp>

#include <iostream>

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

  CLI11_PARSE(app, argc, argv);
  if (train_cmd->parsed()) return pelab::command_train(train, std::cout, std::cerr);
  if (list_cmd->parsed()) pelab::command_list(std::cout);
  return 0;
}
