// `ngram_lookup`: the n-gram lookup tasks of "Repeat After Me: Transformers are Better than
// State Space Models at Copying" (Jelassi, Brandfonbrener, Kakade & Malach 2024;
// sjelassi/transformers_ssm_copy, data_utils.py prefix_ngram / suffix_ngram). A string of
// uniform symbols, and an n-gram that occurs in it exactly once; the output is the
// `answer` symbols that follow that n-gram in the string. variant prefix: the n-gram comes
// first ("$ngram|string|answer"), suffix: the string comes first ("$string|ngram answer").
// Its copying task is `copy` (data/symbol_strings.h), which is the same rule.
// The length is the string's symbols; input length + n + 1 (a separator between string and
// n-gram). The paper: vocabulary 26 (10 in some runs), trigrams, strings of 20-50 symbols
// in training and up to several hundred in tests, packed into a context of 220 tokens.
// Departures: the answer has a fixed length (the paper's default returns the rest of the
// string, of varying length), one example per sequence (no packing), and the n-gram is
// drawn among those that occur once whose answer fits (the reference draws among the first
// length - n - answer - 1 starting points and checks uniqueness among those only).
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class NgramLookupTask : public Seq2SeqTask {
 public:
  explicit NgramLookupTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t input_length(int64_t length) const override { return length + n_ + 1; }
  int64_t output_length(int64_t length) const override { return answer_; }
  bool outputs_are_input_symbols() const override { return true; }
  void check_length(int64_t length, bool training) const override;  // an n-gram and its answer fit

  int64_t separator() const { return vocab_; }
  int64_t n() const { return n_; }
  bool prefix() const { return prefix_; }

 private:
  int64_t vocab_, n_, answer_;
  bool prefix_;
};

}  // namespace pelab
