// `text`: any UTF-8 file read as bytes (token 2 + b for byte b; 0 padding, 1 [MASK]), for
// the "train short, test long" measurement of Press et al. 2022 (ALiBi) on real text.
//
// The file is split by byte offset: the first (1 - holdout) of it trains, the rest
// evaluates; no training window reaches into the held-out bytes.
//
// Formats:
//   causal_lm  next-byte prediction on windows of `length` bytes. Training windows start at
//              uniform offsets of the training split. Evaluation predicts the held-out bytes
//              in file order, either with non-overlapping windows (every byte scored, with 1
//              to length bytes of context) or with sliding windows that advance by `stride`
//              bytes and score only their last `stride` bytes (every scored byte has at least
//              length - stride + 1 bytes of context, and every length >= stride scores the
//              same bytes; a shorter length scores all its bytes, windows advancing by the
//              length). A window's first tokens may be context from before the split; its
//              targets never are. The log and the run file state the protocol.
//   masked_lm  BERT (Devlin et al. 2019): round(mask_rate x length) positions per window
//              (at least one) are predicted; of them 80% become [MASK], 10% a random byte and
//              10% stay unchanged. Evaluation uses non-overlapping held-out windows with
//              masks drawn from the evaluation stream of each length.
// The loss is in nats per predicted byte: bits per byte = loss / ln 2, perplexity = e^loss.
#pragma once

#include <string>

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class TextTask : public Task {
 public:
  static constexpr int64_t kMaskToken = 1;
  static constexpr int64_t kFirstByteToken = 2;
  static constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes/songs-poems";

  // Reads and checks the file (readable, non-empty, valid UTF-8); std::runtime_error otherwise.
  explicit TextTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();
  static std::vector<std::string> formats() { return {"causal_lm", "masked_lm"}; }

  int64_t vocab_size() const override { return kFirstByteToken + 256; }
  int64_t num_classes() const override { return 256; }
  int64_t sequence_length(int64_t length) const override { return length; }
  Batch sample(int64_t batch_size, int64_t length, Rng& rng) const override;
  int64_t evaluation_size(int64_t length, int64_t requested) const override;
  Batch evaluation_batch(int64_t length, int64_t first, int64_t count, Rng& rng) const override;
  void check_length(int64_t length, bool training) const override;
  bool chance_per_position() const override { return false; }
  bool models_text() const override { return true; }
  std::string evaluation_protocol() const override;

  // Bytes [0, split) train, [split, size) evaluate.
  int64_t split_offset() const { return split_; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes() const { return bytes_; }
  // First byte (token) of evaluation window `index` at `length`, and how many of its last positions are scored.
  int64_t evaluation_window_start(int64_t length, int64_t index) const;
  int64_t evaluation_scored_positions(int64_t length) const;
  // Uniform start offset of a training window of `length` bytes (plus the byte it predicts).
  int64_t training_window_start(int64_t length, Rng& rng) const;

 private:
  // Window bytes [start, start + length) as tokens; targets and scoring per the format.
  void fill_window(int64_t row, int64_t start, int64_t length, int64_t scored_from, Rng& rng, Batch& batch) const;
  Batch empty_batch(int64_t rows, int64_t length) const;
  int64_t window_bytes(int64_t length) const;  // bytes a window reads: + 1 for causal_lm's last target

  std::string path_, window_;
  std::string bytes_;
  int64_t split_ = 0, stride_ = 0;
  double mask_rate_ = 0.15;
};

// Offset of the first byte that is not valid UTF-8, or -1 when `text` is valid UTF-8.
int64_t first_invalid_utf8(const std::string& text);

}  // namespace pelab
