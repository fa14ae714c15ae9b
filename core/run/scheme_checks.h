// The properties every scheme must have, measured on one scheme in one setting: the registry-
// wide tests (tests/test_registry_schemes.cpp) run them over every registered scheme and
// variant, and `pelab check-scheme` / pelab.check_scheme over any one, built-in or Python.
// One implementation, so that a scheme nobody here wrote gets the same tests.
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"

namespace pelab {

struct SchemeCheck {
  std::string property;  // "padding invariance"
  std::string measured;  // the number it rests on, e.g. "max |difference| 3.1e-07"
  bool passed = false;
  bool skipped = false;  // did not apply (no CUDA device; not causal)
  std::string note;      // what failed, or why skipped
};

struct SchemeCheckSetting {
  bool causal = false;
  bool randomized = false;  // Ruoss et al.'s randomized positions (a sorted sample of [0, 64)) instead of 0..T-1
  // true: a scheme not declaring shift invariance must see absolute positions (the suite's
  // rule for the built-in schemes); false: only reported
  bool require_absolute = false;
};

// `config`: the model (its encoding and encoding_mix) and seed to check, e.g. check_scheme_config.
// Properties: finite forward and backward, padding invariance, no leak from the future (causal),
// a gradient for every parameter, save/load round trip, shift invariance (when declared),
// score terms adding up to the score bias, float32 against bf16 (on a CUDA device).
std::vector<SchemeCheck> check_scheme(const RunConfig& config, const SchemeCheckSetting& setting);

// The model the checks use (2 layers, d_model 32, 4 heads, segment embeddings, reverse_string)
// with `overrides` (key.path=value, e.g. encoding.name=rope) and the schemes of `scheme_files`.
RunConfig check_scheme_config(const std::vector<std::string>& overrides, const std::vector<std::string>& scheme_files = {});

// The checks as a table: property | measured | result.
std::string format_scheme_checks(const std::vector<SchemeCheck>& checks);

}  // namespace pelab
