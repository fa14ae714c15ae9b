// libFuzzer target for the run-config loader (built with clang by run_config_fuzzer.sh,
// with AddressSanitizer and UndefinedBehaviorSanitizer). Every input must either be
// refused with a ConfigError that names the file, or be a valid config whose resolved
// YAML parses back to itself. Anything else (another exception, a crash, a sanitizer
// report, a hang) is a finding. Torch-free: the catalogs come from `pelab list --yaml`
// (the file named by $PELAB_CATALOG).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/config/catalog_yaml.h"
#include "core/config/config.h"
#include "core/config/yaml_reader.h"

namespace {

pelab::Catalogs catalogs;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "config fuzzer finding: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("PELAB_CATALOG");
  if (!path) finding("setup", "set PELAB_CATALOG to the output of pelab list --yaml");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  catalogs = pelab::catalogs_from_yaml(text.str());
  if (catalogs.schemes.empty() || catalogs.tasks.empty()) finding("setup", std::string("empty catalog in ") + path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pelab::RunConfig config;
  try {
    config = pelab::parse_run_config(text, "fuzz.yaml", {}, catalogs.schemes, catalogs.tasks);
  } catch (const pelab::ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.yaml", 0) != 0) finding("an error that does not name the file", e.what());
    return 0;
  } catch (const std::exception& e) {
    finding("an exception other than ConfigError", e.what());
  }
  const std::string resolved = pelab::to_yaml(config);
  try {
    const pelab::RunConfig again =
        pelab::parse_run_config(resolved, "resolved.yaml", {}, catalogs.schemes, catalogs.tasks);
    if (pelab::to_yaml(again) != resolved) finding("the resolved config does not round-trip", resolved);
  } catch (const std::exception& e) {
    finding("the resolved config of a valid one is refused", std::string(e.what()) + "\n" + resolved);
  }
  return 0;
}
