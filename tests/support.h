// Shared helpers of the test suite. Catch2 is used with CATCH_CONFIG_PREFIX_ALL only:
// LibTorch defines its own CHECK macro (see DESIGN.md).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/encodings/registry.h"
#include "core/config/config.h"
#include "core/model/encoder.h"
#include "data/task.h"
#include "data/task_registry.h"

namespace pelab::test {

// A registered task with its default options, in `format` (empty: the task's default).
std::unique_ptr<Task> default_task(const std::string& name, const std::string& format = "");

// A small run config (2 layers, d_model 32, 4 heads, reverse_string), with `key.path=value` overrides.
RunConfig tiny_config(const std::vector<std::string>& overrides = {});

// One configuration of a scheme: its defaults, or one option set to another value.
struct SchemeVariant {
  std::string scheme;
  OptionValues options;
  std::string label;  // "learned inject=every_layer"
};
// Every registered scheme at its defaults, plus, one option at a time, every other value of
// each choice and bool option (numeric options keep their defaults: scheme_variant).
std::vector<SchemeVariant> all_scheme_variants();
// `scheme` at its defaults but for the options in `set`.
SchemeVariant scheme_variant(const std::string& scheme, const std::vector<std::pair<std::string, OptionValue>>& set);
// Whether a registered scheme is defined for causal attention only.
bool causal_only(const std::string& scheme);
// A scheme variant in one attention mode its scheme is defined for.
struct SchemeMode {
  SchemeVariant variant;
  bool causal = false;
  std::string label() const { return variant.label + (causal ? ", causal" : ", bidirectional"); }
};
// Each of `variants` bidirectional (unless its scheme is causal-only), then causal.
std::vector<SchemeMode> in_each_mode(const std::vector<SchemeVariant>& variants);
// tiny_config, bidirectional or causal.
RunConfig tiny_config_in_mode(bool causal);

// The model of `config` with its encoding replaced by `variant`, in eval mode.
Encoder model_for(RunConfig config, const SchemeVariant& variant, const Task& task);

// A fresh temporary directory, removed by the destructor.
struct TemporaryDirectory {
  TemporaryDirectory();
  ~TemporaryDirectory();
  std::string path;
};

std::string source_path(const std::string& relative);  // path inside the source tree

}  // namespace pelab::test
