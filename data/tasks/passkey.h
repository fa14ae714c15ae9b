// `passkey`: passkey retrieval (Mohtashami & Jaggi 2023, "Landmark Attention: Random-Access
// Infinite Context Length for Transformers", section 4.2). A passkey of k digits sits at a
// depth inside filler, and the input ends by asking for it; the output is its k digits. The
// paper repeats five sentences ("The grass is green. The sky is blue. ...") around "The pass
// key is N. Remember it." and reports accuracy by context length and depth.
// Here the length is the input's tokens: filler, then at the chosen depth the key marker and
// the k digits, then more filler, then the query token (length - k - 2 filler tokens). Depth d
// puts round(d * fillers) filler tokens before the key: 0 at the start, 1 just before the
// query. Training draws the depth uniformly; evaluation visits eval.depths (the task's
// evaluation condition "depth"), or draws it as training does when none are given.
// Symbols: digits 0-9 (the outputs), filler 10 .. 10 + filler_symbols - 1, key marker, query.
// Departures: tokens instead of words; the filler is one phrase of filler_symbols distinct
// tokens repeated (filler: repeated, the paper's case) or uniform random tokens (random);
// the key has exactly k digits (leading zeros allowed) where the paper draws N in 1-50000.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class PasskeyTask : public Seq2SeqTask {
 public:
  explicit PasskeyTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  Example generate_at(int64_t length, double depth, Rng& rng) const override;
  std::string evaluation_condition() const override { return "depth"; }
  int64_t output_length(int64_t length) const override { return digits_; }
  bool outputs_are_input_symbols() const override { return true; }  // digit d is input symbol d
  void check_length(int64_t length, bool training) const override;  // room for key and query

  static constexpr int64_t kDigits = 10;
  int64_t key_marker() const { return kDigits + filler_symbols_; }
  int64_t query() const { return kDigits + filler_symbols_ + 1; }
  // Filler tokens of an example of `length`; the key goes after `filler_before` of them.
  int64_t fillers(int64_t length) const { return length - digits_ - 2; }

 private:
  // The example with the key after `before` filler tokens.
  Example example(int64_t length, int64_t before, Rng& rng) const;

  int64_t digits_, filler_symbols_;
  bool random_filler_;
};

}  // namespace pelab
