#include "tests/support.h"

#include <ftw.h>

#include <cstdio>
#include <filesystem>
#include <random>

namespace pelab::test {

namespace {
const char* kTinyYaml = R"(
name: tiny
seed: 1
threads: 1
task: {name: reverse_string}
model: {d_model: 32, num_layers: 2, num_heads: 4, d_ff: 64}
encoding: {name: none}
train: {steps: 20, batch_size: 8, min_length: 2, max_length: 6, learning_rate: 0.001, log_every: 10}
eval: {lengths: [3, 8], samples: 16, batch_size: 16}
)";
}  // namespace

std::unique_ptr<Task> default_task(const std::string& name, const std::string& format) {
  for (const auto& entry : task_registry())
    if (entry.info.name == name) return entry.factory(OptionValues::defaults(entry.info.options), format);
  throw std::invalid_argument("no task " + name);
}

RunConfig tiny_config(const std::vector<std::string>& overrides) {
  return parse_run_config(kTinyYaml, "tiny.yaml", overrides, scheme_catalog(), task_catalog());
}

std::vector<SchemeVariant> all_scheme_variants() {
  std::vector<SchemeVariant> variants;
  for (const auto& entry : scheme_registry()) {
    const auto defaults = OptionValues::defaults(entry.info.options);
    variants.push_back({entry.info.name, defaults, entry.info.name + " (defaults)"});
    for (const auto& spec : entry.info.options) {
      std::vector<OptionValue> others;  // the option's values other than its default
      if (spec.kind == OptionKind::Choice)
        for (const auto& choice : spec.choices)
          if (choice != std::get<std::string>(spec.default_value)) others.push_back(choice);
      if (spec.kind == OptionKind::Bool) others.push_back(!std::get<bool>(spec.default_value));
      for (const auto& value : others) {
        OptionValues options = defaults;
        options.set(spec.name, value);
        variants.push_back(
            {entry.info.name, options, entry.info.name + " " + spec.name + "=" + format_option_value(value)});
      }
    }
  }
  return variants;
}

SchemeVariant scheme_variant(const std::string& scheme, const std::vector<std::pair<std::string, OptionValue>>& set) {
  SchemeVariant variant{scheme, OptionValues::defaults(find_entry(scheme_registry(), scheme, "scheme").info.options),
                        scheme};
  for (const auto& [name, value] : set) {
    variant.options.set(name, value);
    variant.label += " " + name + "=" + format_option_value(value);
  }
  return variant;
}

bool causal_only(const std::string& scheme) { return find_entry(scheme_registry(), scheme, "scheme").info.causal_only; }

std::vector<SchemeMode> in_each_mode(const std::vector<SchemeVariant>& variants) {
  std::vector<SchemeMode> modes;
  for (const auto& variant : variants)
    for (bool causal : {false, true})
      if (causal || !causal_only(variant.scheme)) modes.push_back({variant, causal});
  return modes;
}

RunConfig tiny_config_in_mode(bool causal) {
  return tiny_config({std::string("model.causal=") + (causal ? "true" : "false")});
}

Encoder model_for(RunConfig config, const SchemeVariant& variant, const Task& task) {
  config.encoding.name = variant.scheme;
  config.encoding.options = variant.options;
  torch::manual_seed(config.seed);
  Encoder model(config.model, config.encoding, task.vocab_size(), task.num_classes());
  model->eval();
  return model;
}

TemporaryDirectory::TemporaryDirectory() {
  std::random_device device;
  auto base = std::filesystem::temp_directory_path();
  for (;;) {
    auto candidate = base / ("pelab-test-" + std::to_string(device()));
    if (std::filesystem::create_directory(candidate)) {
      path = candidate.string();
      return;
    }
  }
}

namespace {
int remove_entry(const char* entry, const struct stat*, int, struct FTW*) {
  std::remove(entry);  // a file, or a directory already emptied (FTW_DEPTH: contents first)
  return 0;            // go on past what cannot be removed
}
}  // namespace

// Not std::filesystem::remove_all: Python torch's LibTorch (2.4 on) exports the copy of
// libstdc++'s recursive_directory_iterator it was linked with (PyTorch issue 133437), and the
// system libstdc++'s remove_all then builds its iterator with that copy, whose state need not
// have the layout it reads (GCC 13 changed it). tests/libtorch_std_symbols.sh keeps pelab's
// binaries off these symbols.
TemporaryDirectory::~TemporaryDirectory() { nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

std::string source_path(const std::string& relative) { return std::string(PELAB_SOURCE_DIR) + "/" + relative; }

}  // namespace pelab::test
