// `compute_sqrt`: floor of the square root of a binary number, big-endian (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/compute_sqrt.py: n uniform in [1, 2^L - 1] as L big-endian bits; output
// floor(sqrt(n)) big-endian, zero-padded to ceil(L/2) bits, every bit scored.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class ComputeSqrtTask : public Seq2SeqTask {
 public:
  explicit ComputeSqrtTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return (length + 1) / 2; }
};

}  // namespace pelab
