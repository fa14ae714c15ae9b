// `flip_flop`: flip-flop language modeling (Liu, Ash, Goel, Krishnamurthy & Zhang 2023,
// "Exposing Attention Glitches with Flip-Flop Language Modeling"). A sequence of
// instructions, each write, ignore or read with a bit; a read must return the bit of the
// last write. FFL(p) draws ignore with probability p_ignore and write or read with
// (1 - p_ignore) / 2 each; the first instruction is a write and the last a read. The paper
// trains at p_ignore 0.8 on 512 tokens (256 instructions) and tests in distribution, sparse
// (0.98: long gaps between writes and reads) and dense (0.1).
// Here the length is the instructions n; each instruction is one input token (w0, w1, i0,
// i1, r: symbols 0-4, the read's bit left out), and the output at every position is the bit
// a read there returns, scored at the reads only (sequence accuracy: every read right).
// Evaluation visits eval.p_ignore (the task's evaluation condition "p_ignore"), or draws
// at task.p_ignore as training does when none are given.
// Departures: instruction and bit share a token, and the reads' bits are outputs rather than
// next tokens of one stream (the paper scores only those deterministic tokens too).
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class FlipFlopTask : public Seq2SeqTask {
 public:
  explicit FlipFlopTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override { return generate_at(length, p_ignore_, rng); }
  Example generate_at(int64_t length, double p_ignore, Rng& rng) const override;
  std::string evaluation_condition() const override { return "p_ignore"; }
  int64_t output_length(int64_t length) const override { return length; }
  void check_length(int64_t length, bool training) const override;  // a write and a read

  // input symbols: write 0 / 1, ignore 0 / 1, read
  static constexpr int64_t kWrite0 = 0, kWrite1 = 1, kIgnore0 = 2, kIgnore1 = 3, kRead = 4;

 private:
  double p_ignore_;
};

}  // namespace pelab
