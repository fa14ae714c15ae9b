// `mqar`: multi-query associative recall (Arora et al. 2023, "Zoology: Measuring and Improving
// Recall in Efficient Language Models"; HazyResearch/zoology, multiquery_ar). The input lists n
// key-value pairs, keys distinct, then queries every key once in a random order; the output is
// each query's value, in the queries' order. The task's length is the number of pairs n (the
// input has 3n tokens), so the pairs grow with the length as in the paper's settings.
// Input symbols: keys [0, keys), values keys + [0, values); output classes: the values.
// Departures: no noise tokens between the queries (Zoology fills a fixed sequence length,
// 64 tokens for 4 pairs up to 512 for 64, with zeros between queries at power-law gaps), and
// every key is queried once, in the order drawn.
#pragma once

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class MqarTask : public Seq2SeqTask {
 public:
  explicit MqarTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t input_length(int64_t length) const override { return 3 * length; }
  int64_t output_length(int64_t length) const override { return length; }
  // more pairs than distinct keys cannot be drawn
  void check_length(int64_t length, bool training) const override;

  int64_t keys() const { return keys_; }

 private:
  int64_t keys_, values_;
};

}  // namespace pelab
