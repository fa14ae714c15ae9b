// Tasks produce batches for a given input length and random stream. Sequence-to-sequence
// tasks are written as plain example generators (input symbols -> output symbols), and
// encoded for the encoder as in Ruoss et al. 2023: the input tokens followed by one
// placeholder token per output token, scored at the placeholders only.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace pelab {

struct Batch {
  torch::Tensor tokens;    // (B, T) int64; 0 is padding
  torch::Tensor padding;   // (B, T) bool, true at padding
  torch::Tensor targets;   // (B, T) int64 class ids, 0 where not scored
  torch::Tensor scored;    // (B, T) bool, positions that carry loss and accuracy
  torch::Tensor segments;  // (B, T) int64: 0 on the input, 1 on the output placeholders
  int64_t length = 0;      // the task's input length

  Batch to(torch::Device device) const;
  // Appends `extra` padding positions to every row (tests of padding invariance).
  Batch padded(int64_t extra) const;
};

using Rng = std::mt19937_64;

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t vocab_size() const = 0;   // input token ids: [0, vocab_size)
  virtual int64_t num_classes() const = 0;  // output classes: [0, num_classes)
  // Sequence length T of an example of input length `length`.
  virtual int64_t sequence_length(int64_t length) const = 0;
  virtual Batch sample(int64_t batch_size, int64_t length, Rng& rng) const = 0;
};

// One example of a symbol-to-symbol task: input symbols in [0, input_symbols), output
// classes in [0, output_classes).
struct Example {
  std::vector<int64_t> input, output;
  std::vector<bool> scored;  // per output position; empty: all scored
};

// Ruoss et al. encoder format: tokens are [input..., placeholder x |output|]; token ids:
// 0 padding, 1 placeholder, 2 + s for symbol s; targets are the output symbols.
class Seq2SeqTask : public Task {
 public:
  // Input and output alphabets; a copying task has output_classes == input_symbols.
  Seq2SeqTask(int64_t input_symbols, int64_t output_classes)
      : input_symbols_(input_symbols), output_classes_(output_classes) {}
  explicit Seq2SeqTask(int64_t alphabet_size) : Seq2SeqTask(alphabet_size, alphabet_size) {}
  static constexpr int64_t kPlaceholderToken = 1;
  static constexpr int64_t kFirstSymbolToken = 2;

  int64_t vocab_size() const override { return kFirstSymbolToken + input_symbols_; }
  int64_t num_classes() const override { return output_classes_; }
  int64_t sequence_length(int64_t length) const override { return input_length(length) + output_length(length); }
  Batch sample(int64_t batch_size, int64_t length, Rng& rng) const override;

  virtual Example generate(int64_t length, Rng& rng) const = 0;
  virtual int64_t output_length(int64_t length) const = 0;
  // Input tokens of an example of `length` (modular_arithmetic shortens even lengths by one).
  virtual int64_t input_length(int64_t length) const { return length; }
  int64_t input_symbols() const { return input_symbols_; }

 protected:
  // `length` symbols uniform over [0, symbols) (default: the whole input alphabet).
  std::vector<int64_t> random_symbols(int64_t length, Rng& rng, int64_t symbols = 0) const;

 private:
  int64_t input_symbols_, output_classes_;
};

// Encodes examples (all of the same input length) into a batch in the encoder format.
Batch encode_examples(const std::vector<Example>& examples);

}  // namespace pelab
