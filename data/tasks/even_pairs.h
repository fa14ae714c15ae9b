// `even_pairs`: whether the number of ab and ba pairs of a binary string is even (Deletang et al. 2023, regular)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/regular/even_pairs.py: output (#{i : s[i] != s[i+1]}) mod 2, one token.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class EvenPairsTask : public Seq2SeqTask {
 public:
  explicit EvenPairsTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
};

}  // namespace pelab
