// `pelab import-hf DIR`: an HF BERT checkpoint as a pelab run file (core/run/hf_import.h).
#pragma once

#include <ostream>

#include "core/run/hf_import.h"

namespace pelab {

struct ImportHfArguments {
  std::string dir;
  HfImportOptions options;
  bool force = false;  // replace a run file that is there
};

// Exit codes: 0 written, 2 what pelab cannot express or a bad argument, 1 unreadable files.
int command_import_hf(const ImportHfArguments& arguments, std::ostream& out, std::ostream& err);

}  // namespace pelab
