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

struct CheckSchemeArguments {
  std::string scheme;                     // a registered name, or one of scheme_files'
  std::vector<std::string> scheme_files;  // Python files defining schemes (as a config's schemes:)
  std::vector<std::string> overrides;     // key.path=value, e.g. encoding.base=500
  std::string mode = "both";              // both | bidirectional | causal
  bool randomized = true;                 // also with randomized positions
};
// `pelab check-scheme`: the registry-wide properties (core/run/scheme_checks.h) on one scheme,
// a table per setting; exit 0 when all pass, 1 when one fails, 2 for a bad name or config.
int command_check_scheme(const CheckSchemeArguments& arguments, std::ostream& out, std::ostream& err);

// Exit codes: 0 success, 2 invalid config or arguments, 1 a failure while running,
// 75 (kExitInterrupted) stopped by SIGINT/SIGTERM after writing a checkpoint (main installs
// the handlers: install_stop_handlers).
int command_train(const TrainArguments& arguments, std::ostream& out, std::ostream& err);
// The catalogs as text, or with `yaml` as YAML (core/config/catalog_yaml.h).
// `scheme_files`: Python files whose schemes are listed too; exit status (2: a file does not load).
int command_list(std::ostream& out, std::ostream& err, bool yaml = false, const std::vector<std::string>& scheme_files = {});

// One catalog as `pelab list` prints it.
std::string format_catalog(const std::string& title, const Catalog& catalog);

}  // namespace pelab
