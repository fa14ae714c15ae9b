// `selective_copying`: the selective-copying task of the Mamba paper (Gu & Dao 2023, section
// 4.1.1; after Arjovsky et al.'s copying task): `tokens` data tokens at uniform distinct
// positions among noise tokens; the output is the data tokens in their order. Input symbols:
// vocab_size data tokens, then the noise token (symbol vocab_size). The task's length is the
// input length; the number of tokens to copy stays fixed, so longer inputs spread them wider.
// Mamba: 4096 tokens, 16 to copy, vocabulary 16.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class SelectiveCopyingTask : public Seq2SeqTask {
 public:
  explicit SelectiveCopyingTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return tokens_; }
  bool outputs_are_input_symbols() const override { return true; }
  void check_length(int64_t length, bool training) const override;  // at least `tokens`

  int64_t noise() const { return vocab_; }

 private:
  int64_t vocab_, tokens_;
};

}  // namespace pelab
