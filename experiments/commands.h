// The pelab subcommands, callable without the command-line parser (tests use them).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/io/config.h"

namespace pelab {

struct TrainArguments {
  std::string config_path;
  std::vector<std::string> overrides;  // key.path=value
  std::string out_dir;                 // empty: output.dir of the config
};

// Exit codes: 0 success, 2 invalid config or arguments, 1 a failure while running.
int command_train(const TrainArguments& arguments, std::ostream& out, std::ostream& err);
void command_list(std::ostream& out);
// One catalog as `pelab list` prints it.
std::string format_catalog(const std::string& title, const Catalog& catalog);

}  // namespace pelab
