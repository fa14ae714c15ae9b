// `token_ids`: sequences of a tokenizer's ids for a model whose vocabulary is not pelab's,
// such as a BERT checkpoint brought in by `pelab import-hf` (docs/import-hf.md). Each token
// is scored as its own target (the model's output at a position names the token there), so
// that evaluation, attention maps, the position probes and the untrained-row report run on
// the model as they do on a trained pelab run.
//
// Ids are uniform over [first_id, last_id], or, with `file`, windows of the ids written in
// it (whitespace-separated, e.g. a tokenizer's output; read as one stream): training windows
// at uniform offsets, evaluation windows in file order without overlap. `cls_id` and
// `sep_id` (BERT's [CLS] and [SEP]) wrap every sequence when given: a sequence of input
// length L then has L + 2 tokens, both added tokens scored like the others.
#pragma once

#include <string>
#include <vector>

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class TokenIdsTask : public Task {
 public:
  // Reads `file` when given; std::runtime_error when it cannot be read, is empty or holds an
  // id outside [0, vocab_size).
  explicit TokenIdsTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
  static std::vector<std::string> formats() { return {"encoder"}; }

  int64_t vocab_size() const override { return vocab_size_; }
  int64_t num_classes() const override { return vocab_size_; }
  int64_t sequence_length(int64_t length) const override { return length + wrap_tokens(); }
  Batch sample(int64_t batch_size, int64_t length, Rng& rng) const override;
  int64_t evaluation_size(int64_t length, int64_t requested) const override;
  Batch evaluation_batch(int64_t length, int64_t first, int64_t count, Rng& rng) const override;
  void check_length(int64_t length, bool training) const override;
  std::string evaluation_protocol() const override;

  const std::vector<int64_t>& file_ids() const { return ids_; }

 private:
  int64_t wrap_tokens() const { return (cls_id_ >= 0 ? 1 : 0) + (sep_id_ >= 0 ? 1 : 0); }
  // row `row` of `batch`: the ids `body` (input length of them), wrapped, each its own target
  void fill_row(Batch& batch, int64_t row, const int64_t* body, int64_t length) const;
  Batch empty_batch(int64_t rows, int64_t length) const;

  int64_t vocab_size_, first_id_, last_id_, cls_id_, sep_id_;
  std::string path_;
  std::vector<int64_t> ids_;  // the file's ids, in order (empty: uniform ids)
};

}  // namespace pelab
