// The string tasks of the NoPE paper (Kazemnejad et al. 2023, "The Impact of Positional
// Encoding on Length Generalization in Transformers"): `copy`, `reverse` and `sort` of
// uniform random symbols over a configurable vocabulary (default 26 symbols, the letters
// of McGill-NLP/length-generalization's examples). The output is a rearrangement of the
// input symbols, so in causal_lm format the output reuses the input tokens.
// `reverse` follows the same rule as `reverse_string` (Deletang et al., binary alphabet by
// default); the two names keep each paper's defaults.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

enum class StringTransform { Copy, Reverse, Sort };

class SymbolStringTask : public Seq2SeqTask {
 public:
  SymbolStringTask(const OptionValues& options, StringTransform transform);
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
  bool outputs_are_input_symbols() const override { return true; }
  bool outputs_rearrange_input() const override { return true; }

 private:
  StringTransform transform_;
};

class CopyTask : public SymbolStringTask {
 public:
  explicit CopyTask(const OptionValues& options) : SymbolStringTask(options, StringTransform::Copy) {}
  static std::string description() { return "output the input unchanged (Kazemnejad et al. 2023)"; }
};

class ReverseTask : public SymbolStringTask {
 public:
  explicit ReverseTask(const OptionValues& options) : SymbolStringTask(options, StringTransform::Reverse) {}
  static std::string description() { return "output the input reversed (Kazemnejad et al. 2023)"; }
};

class SortTask : public SymbolStringTask {
 public:
  explicit SortTask(const OptionValues& options) : SymbolStringTask(options, StringTransform::Sort) {}
  static std::string description() { return "output the input symbols in ascending order (Kazemnejad et al. 2023)"; }
};

}  // namespace pelab
