// `bucket_sort`: the input sorted ascending (Deletang et al. 2023, context-sensitive)
// google-deepmind/neural_networks_chomsky_hierarchy tasks/cs/bucket_sort.py: uniform symbols over alphabet_size (5), output sorted.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class BucketSortTask : public Seq2SeqTask {
 public:
  explicit BucketSortTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
  bool outputs_are_input_symbols() const override { return true; }
  bool outputs_rearrange_input() const override { return true; }
};

}  // namespace pelab
