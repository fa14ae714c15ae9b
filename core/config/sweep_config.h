// A sweep: a base run config plus axes over config key paths, expanded into runs with
// stable, readable ids. Torch-free.
//
//   name: quickstart
//   base: ../quickstart.yaml          # a run config, relative to the sweep file
//   set: {train.steps: 800}           # overrides applied to every run (optional)
//   grid:                             # the cartesian product, the last axis varying fastest
//     encoding.name: [none, sinusoidal, rope, alibi]
//     seed: [0, 1]
//   zip:                              # lists of equal length, advanced together (optional),
//     train.max_length: [10, 20]      #   crossed with the grid
//     eval.lengths: [[5, 10, 20], [10, 20, 40]]
//   output: runs/sweeps/quickstart    # the sweep directory (relative to the working directory)
//   slurm: {partition: debug, time: "00:30:00", cpus_per_task: 2, gpus: 0, mem: 4G}
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"

namespace pelab {

struct SweepAxis {
  std::string key;                  // a config key path, e.g. encoding.name
  std::vector<std::string> values;  // YAML flow text of each value, e.g. rope or [5, 10]
};

struct SlurmSettings {
  std::string partition;            // empty: the cluster's default
  std::string time = "01:00:00";    // per run
  int64_t cpus_per_task = 2;
  int64_t gpus = 0;
  std::string mem;                  // e.g. 4G; empty: the cluster's default
  int64_t runs_per_task = 1;        // runs side by side in one array task (sharing its GPUs);
                                    //   cpus_per_task and mem are per run, the task asks for N x
};

struct SweepConfig {
  std::string file;                 // the sweep file, as given
  std::string name;
  std::string base;                 // the base run config, resolved against the sweep file's folder
  std::vector<std::pair<std::string, std::string>> fixed;  // `set`: key, YAML value
  std::vector<SweepAxis> grid, zip;
  std::string output;
  SlurmSettings slurm;
};

struct SweepRun {
  int64_t index = 0;
  std::string id;                          // e.g. encoding-rope_seed-1
  std::vector<std::string> overrides;      // key=value of the axes (the run's identity)
  std::vector<std::string> all_overrides;  // `set` entries, then the axes
  std::string dir;                         // <output>/runs/<id>
};

// Loads and checks a sweep file (errors as file:line:col, ConfigError).
SweepConfig load_sweep_config(const std::string& path);
// The runs of a sweep, in a stable order. Each run's config is validated against the
// catalogs (a bad value fails here, naming the run) unless `validate` is false.
std::vector<SweepRun> expand_sweep(const SweepConfig& sweep, const Catalog& schemes, const Catalog& tasks,
                                   bool validate = true);
// The readable id of a run from its axis overrides: `<label>-<value>` joined by `_`, where
// the label of `encoding.name` is `encoding` and of `train.max_length` is `max_length`.
std::string run_id(const std::vector<std::pair<std::string, std::string>>& axis_values);
// That label of a key path: encoding.name -> encoding, train.max_length -> max_length.
std::string axis_label(const std::string& key);

}  // namespace pelab
