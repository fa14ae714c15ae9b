// `induction_heads`: the induction-head task of the Mamba paper's synthetic suite (Gu & Dao 2023,
// "Mamba", section 4.1.2; after Olsson et al. 2022, "In-context Learning and Induction Heads").
// Random tokens hold one trigger token, followed by the token to recall, at a uniform position;
// the input ends with the trigger again, and the output is the token that followed it the
// first time. Input symbols: vocab_size tokens, then the trigger (symbol vocab_size); the
// trigger appears nowhere else. Mamba: vocabulary 16, trained at 256 tokens, tested to 2^20.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class InductionHeadsTask : public Seq2SeqTask {
 public:
  explicit InductionHeadsTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return 1; }
  bool outputs_are_input_symbols() const override { return true; }
  void check_length(int64_t length, bool training) const override;  // at least 3 tokens

  int64_t trigger() const { return vocab_; }

 private:
  int64_t vocab_;
};

}  // namespace pelab
