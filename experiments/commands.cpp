#include "experiments/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/encodings/registry.h"
#include "core/run/scheme_checks.h"
#include "core/config/catalog_yaml.h"
#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "core/config/sweep_config.h"
#include "core/config/run_name.h"
#include "core/config/yaml_reader.h"
#include "core/run/run.h"
#include "core/train/checkpoint.h"
#include "core/train/progress.h"
#include "core/train/stop_signal.h"
#include "data/task_registry.h"

namespace pelab {

namespace {

// --resume of a run that has a checkpoint (or a complete run file) in `config`'s output
// folder: the config stored there, so that the --set options of the first command need not
// be typed again. Options given now must agree with it (the operational keys,
// is_operational_config_key, may differ and are taken from them); each that does not is named
// with its stored value. Without a stored config, `config` itself.
RunConfig resumed_config(const RunConfig& config, const std::vector<std::string>& overrides) {
  namespace fs = std::filesystem;
  const std::string checkpoint = config.output.dir + "/" + kCheckpointFileName;
  const std::string run_file = config.output.dir + "/run.h5";
  std::string source, stored_yaml;
  try {
    if (fs::exists(checkpoint)) {
      source = checkpoint;
      stored_yaml = read_training_checkpoint(checkpoint).config_yaml;
    } else if (is_complete_run_file(run_file)) {
      source = run_file;
      stored_yaml = read_run_file(run_file, /*with_checkpoint=*/false).config_yaml;
    } else {
      return config;
    }
  } catch (const std::runtime_error&) {  // unreadable: the run itself says so, with its path
    return config;
  }
  const RunConfig stored = stored_run_config(source, stored_yaml);
  std::vector<std::string> disagreeing;
  for (const auto& entry : overrides) {
    if (entry.rfind("output.dir=", 0) == 0) continue;
    const RunConfig with = parse_run_config(to_yaml(stored), source, {entry}, scheme_catalog(), task_catalog());
    for (const auto& difference : config_differences(to_yaml(stored), to_yaml(with)))
      disagreeing.push_back("--set " + entry + " (stored " + difference.substr(0, difference.find(" -> ")) + ")");
  }
  if (!disagreeing.empty())
    throw ConfigError(source + " was trained with another config: " + join(disagreeing, "; ") +
                      ". Leave these options out to resume it as stored, or give another --out for a new run");
  RunConfig resumed = stored;  // what may differ from the stored run: given now, or as stored
  for (const auto& entry : overrides) {
    const std::string key = entry.substr(0, entry.find('='));
    if (is_operational_config_key(key) && key != "output.dir") {
      const RunConfig with = parse_run_config(to_yaml(resumed), source, {entry}, scheme_catalog(), task_catalog());
      resumed = with;
    }
  }
  resumed.output.dir = config.output.dir;
  return resumed;
}

// The --set options that change what a run computes, as (key, value): not the operational
// keys (where it writes, how many threads, which device, how often it checkpoints), nor how
// often it logs (train.log_every: the curve's rows, not the run's numbers; unlike the
// operational keys a resume does not take it, as the checkpoint holds its log window).
// `in_name`: the keys the config's name already shows (name_template_keys), also left out.
std::vector<std::pair<std::string, std::string>> naming_overrides(const std::vector<std::string>& overrides,
                                                                  const std::vector<std::string>& in_name) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& entry : overrides) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;  // the loader names the malformed entry
    const std::string key = entry.substr(0, eq);
    if (key == "name") return {};  // named on the command line: nothing to derive
    if (!is_operational_config_key(key) && key != "train.log_every" &&
        std::find(in_name.begin(), in_name.end(), key) == in_name.end())
      pairs.emplace_back(key, entry.substr(eq + 1));
  }
  return pairs;
}

}  // namespace

int command_train(const TrainArguments& arguments, std::ostream& out, std::ostream& err) {
  RunConfig config;
  try {
    std::vector<std::string> overrides = arguments.overrides;
    if (!arguments.out_dir.empty()) overrides.push_back("output.dir=" + arguments.out_dir);
    config = load_run_config(arguments.config_path, overrides, scheme_catalog(), task_catalog());
    // runs of one config file with other --set options get names (and default output folders)
    // that say what differs: quickstart_encoding-alibi_seed-1, unless --set name=... is given
    const YAML::Node raw_name = parse_yaml(read_config_file(arguments.config_path, "config file"),
                                           arguments.config_path)["name"];
    const auto naming = naming_overrides(
        arguments.overrides, raw_name && raw_name.IsScalar() ? name_template_keys(raw_name.as<std::string>())
                                                             : std::vector<std::string>());
    if (!naming.empty()) {
      overrides.push_back("name=" + config.name + "_" + run_id(naming));
      config = load_run_config(arguments.config_path, overrides, scheme_catalog(), task_catalog());
    }
    if (arguments.resume) config = resumed_config(config, arguments.overrides);
    // a finished run of other settings in the output folder is not trained over
    const std::string run_file = config.output.dir + "/" + schema::kRunFileName;
    if (!arguments.resume && is_complete_run_file(run_file)) {
      const auto differences =
          differences_from_stored(run_file, read_run_file(run_file, /*with_checkpoint=*/false).config_yaml, config);
      if (!differences.empty())
        throw ConfigError(fmt::format("{} holds a finished run of other settings ({}): give another folder with "
                                      "--out DIR, or remove it to train over it",
                                      run_file, join(differences, "; ")));
    }
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  try {
    execute_run(config, out, ProgressReporter::stdout_is_terminal(), arguments.resume);
  } catch (const RunInterrupted& e) {
    out.flush();
    err << "interrupted: run '" << config.name << "' " << e.what() << "\n";
    if (!e.checkpoint.empty())  // the checkpoint holds the config: no --set options needed
      err << "resume with: pelab train " << arguments.config_path << " --resume --out " << config.output.dir << "\n";
    return kExitInterrupted;
  } catch (const LengthsDoNotFit& e) {  // the config asks what the scheme cannot do: 2, as a config error
    err << "error: run '" << config.name << "' failed: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {  // LibTorch's what() carries a C++ backtrace: leave it out
    err << "error: run '" << config.name << "' failed: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "error: run '" << config.name << "' failed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

std::string format_catalog(const std::string& title, const Catalog& catalog) {
  std::string text = title + ":\n";
  size_t width = 0;
  for (const auto& entry : catalog) width = std::max(width, entry.name.size());
  for (const auto& entry : catalog) {
    text += fmt::format("  {:<{}}  {}\n", entry.name, width, entry.description);
    if (!entry.formats.empty())
      text += fmt::format("      {:<16} {} (default {})\n", "format", join(entry.formats, " | "), entry.formats.front());
    for (const auto& o : entry.options) {
      std::string range = o.describe_range();
      text += fmt::format("      {:<16} {} = {}{}  {}\n", o.name, o.kind_name(), format_option_value(o.default_value),
                          range.empty() ? "" : ", " + range, o.help);
    }
  }
  return text;
}

int command_list(std::ostream& out, std::ostream& err, bool yaml, const std::vector<std::string>& scheme_files) {
  try {
    load_scheme_files(scheme_files);
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  if (yaml) {
    out << catalogs_to_yaml({scheme_catalog(), task_catalog()});
    return 0;
  }
  out << format_catalog("position encodings (encoding.name, options beside it)", scheme_catalog()) << "\n"
      << format_catalog("tasks (task.name, task.format and options beside it)", task_catalog()) << "\n"
      << "task formats (task.format):\n"
      << "  encoder            input, then one placeholder per output token, scored at the placeholders "
         "(Ruoss et al. 2023); bidirectional or causal\n"
      << "  causal_lm          input, separator, output; next-token prediction scored on the output "
         "(Kazemnejad et al. 2023); needs model.causal: true\n"
      << "  masked_lm          BERT masked language modeling (text only); needs model.causal: false\n\n"
      << "position samplers (positions.sampler, with positions.max_length = L_max and positions.evaluate_with):\n"
      << "  contiguous         0, 1, ..., T-1 (default)\n"
      << "  random_offset      s, s+1, ..., s+T-1 with s uniform in [0, L_max - T], one draw per batch\n"
      << "  randomized         a sorted sample of T distinct positions from [0, L_max), one draw per batch "
         "(Ruoss et al. 2023)\n"
      << "  cape               real (p + shift + jitter) x scale, p = 0..T-1 (positions.global_shift, local_shift, "
         "global_scaling; Likhomanenko et al. 2021); training only\n"
      << "  random_float       T sorted uniform reals from [0, L_max), one draw per batch (Shimizu et al. 2026)\n"
      << "  (real-valued positions: schemes with position tables refuse them)\n\n"
      << "evaluation-time extrapolation (eval.extrapolation, rotary schemes and t5_bias): none, interpolation "
         "(positions / s), ntk (base x s^(R/(R-2))), yarn (NTK-by-parts and temperature 0.1 ln s + 1), "
         "dynamic_ntk (base x (alpha s - alpha + 1)^(R/(R-2))), rerope and leaky_rerope (rope only: offsets beyond "
         "rerope_window clamped, or slowed by rerope_leak), clamp (t5_bias only: distances beyond L - 1 read its "
         "bucket); s = test / training sequence length, in tokens, L the training one\n\n"
      << "attention logit scaling (model.logit_scaling; docs/schemes.md#length-dependent-logit-scaling):\n"
      << "  none               the logits as the scheme makes them (default)\n"
      << "  log_length         each query's logits times log n, n the keys it sees\n"
      << "  ssmax              times s log n, s learned per head and block from model.ssmax_init (default 0.43; "
         "Nakanishi 2025)\n"
      << "  constant           times model.logit_scale (default 1), a temperature for every head\n"
      << "  per_head           times s, learned per head and block from model.logit_scale (Wang et al. 2024's "
         "NoPE temperature)\n"
      << "  llama4             times 1 + model.llama4_scale log(floor(n / model.llama4_floor_scale) + 1) (defaults 0.1, "
         "8192; Llama 4's attention temperature, n = position + 1 in causal attention)\n\n"
      << "a second scheme in some blocks (encoding_mix; docs/schemes.md#a-scheme-per-layer):\n"
      << "  encoding_mix.name  any scheme above, its options beside the name (default none)\n"
      << "  encoding_mix.every N: blocks N-1, 2N-1, ... use it (4: blocks 3, 7, ...); 0: no block (default)\n\n"
      << "schemes by head (encoding_heads; docs/schemes.md#schemes-by-head), with encoding left at none:\n"
      << "  encoding_heads     a list of {num_heads: N, name: SCHEME, its options}, the next N heads of every block "
         "with that scheme; the heads sum to model.num_heads (NAPE: alibi and none; Hard-ALiBi: hard_alibi and "
         "none); schemes that add to the residual stream are refused\n\n"
      << "local attention (docs/configuration.md#local-attention), by token index:\n"
      << "  model.window W     each query sees the keys within W tokens (causal: i - W < j <= i; bidirectional: "
         "|i - j| < W); 0: every key (default)\n"
      << "  model.chunk C      each query sees the keys of its own block of C tokens (Llama 4); 0: none (default); "
         "not with window\n"
      << "  model.global_every N: with window or chunk, blocks N-1, 2N-1, ... attend globally (N >= 2; Command A: 4); "
         "0: every block local (default)\n"
      << "  model.logit_scaling_blocks all | global: model.logit_scaling in every block (default), or only in "
         "the global ones (Llama 4's temperature on its NoPE layers)\n\n"
      << "schemes written in Python (pelab.Scheme classes, docs/python-schemes.md): a config's top-level "
         "schemes: [FILE.py, ...] registers them for its run; pelab list --schemes FILE.py lists them, "
         "pelab check-scheme NAME --schemes FILE.py tests them\n";
  return 0;
}

int command_check_scheme(const CheckSchemeArguments& arguments, std::ostream& out, std::ostream& err) {
  RunConfig config;
  bool causal_only = false;
  try {
    load_scheme_files(arguments.scheme_files);
    causal_only = find_entry(scheme_registry(), arguments.scheme, "position encoding").info.causal_only;
    std::vector<std::string> overrides = {"encoding.name=" + arguments.scheme,
                                          std::string("model.causal=") + (causal_only ? "true" : "false")};
    for (const auto& o : arguments.overrides)  // an option of the scheme, or any key.path
      overrides.push_back(o.substr(0, o.find('=')).find('.') == std::string::npos ? "encoding." + o : o);
    config = check_scheme_config(overrides, arguments.scheme_files);
  } catch (const std::exception& e) {  // ConfigError, or an unknown name (std::invalid_argument)
    err << "error: pelab check-scheme: " << e.what() << "\n";
    return 2;
  }
  std::vector<bool> modes;
  if (arguments.mode != "causal" && !causal_only) modes.push_back(false);
  if (arguments.mode != "bidirectional" || causal_only) modes.push_back(true);
  bool all_passed = true;
  for (bool causal : modes)
    for (bool randomized : arguments.randomized ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      out << config.encoding.name << ", " << (causal ? "causal" : "bidirectional")
          << (randomized ? ", randomized positions" : ", positions 0..T-1") << ":\n";
      std::vector<SchemeCheck> checks;
      try {
        checks = check_scheme(config, {causal, randomized, false});
      } catch (const c10::Error& e) {
        out << "  FAIL: the scheme raised: " << e.what_without_backtrace() << "\n\n";
        all_passed = false;
        continue;
      } catch (const std::exception& e) {
        out << "  FAIL: the scheme raised: " << e.what() << "\n\n";
        all_passed = false;
        continue;
      }
      std::string table = format_scheme_checks(checks);
      for (size_t start = 0; start < table.size();) {
        const size_t end = table.find('\n', start);
        out << "  " << table.substr(start, end - start) << "\n";
        start = end + 1;
      }
      out << "\n";
      for (const auto& c : checks) all_passed = all_passed && c.passed;
    }
  out << (all_passed ? "every property holds\n" : "a property FAILED\n");
  return all_passed ? 0 : 1;
}

}  // namespace pelab
