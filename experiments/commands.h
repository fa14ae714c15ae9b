// The pelab subcommands, callable without the command-line parser (tests use them).
#pragma once

#include <ostream>
#include <string>
#include <cstdint>
#include <vector>

#include "core/config/config.h"

namespace pelab {

struct TrainArguments {
  std::string config_path;
  std::vector<std::string> overrides;  // key.path=value
  std::string out_dir;                 // empty: output.dir of the config
  bool resume = false;                 // continue from <output.dir>/checkpoint.h5 when there is one
};

// Exit codes: 0 success, 2 invalid config or arguments, 1 a failure while running,
// 75 (kExitInterrupted) stopped by SIGINT/SIGTERM after writing a checkpoint (main installs
// the handlers: install_stop_handlers).
int command_train(const TrainArguments& arguments, std::ostream& out, std::ostream& err);
// The catalogs as text, or with `yaml` as YAML (core/config/catalog_yaml.h).
void command_list(std::ostream& out, bool yaml = false);

// One catalog as `pelab list` prints it.
std::string format_catalog(const std::string& title, const Catalog& catalog);

}  // namespace pelab
