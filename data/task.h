// Tasks produce batches for a given input length and random stream. Sequence-to-sequence
// tasks are written as plain example generators (input symbols -> output symbols) and
// encoded in one of two formats (task.format):
//   encoder    (Ruoss et al. 2023): the input tokens followed by one placeholder token per
//              output token, scored at the placeholders; bidirectional or causal attention.
//   causal_lm  (Kazemnejad et al. 2023): input, separator, output; next-token prediction
//              scored on the output tokens only (causal attention). Exact match under
//              teacher forcing equals greedy-decoding exact match: a greedy decoder that
//              gets every output token right fed itself exactly the teacher's tokens.
// The text task (data/text.h) reads bytes of a file: causal_lm or masked_lm (BERT).
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
  torch::Tensor segments;  // (B, T) int64: 0 on the input, 1 on the output (placeholders or separator + output)
  torch::Tensor positions;  // (B, T) int64 task-given positions (addition positions: abacus), or undefined
  // (B, T) int64 class ids: at each scored position what a model without positions predicts at
  // best (Seq2SeqTask::outputs_rearrange_input: the input's most frequent symbol), or undefined
  torch::Tensor position_free;
  int64_t length = 0;      // the task's input length

  Batch to(torch::Device device) const;
  // Appends `extra` padding positions to every row (tests of padding invariance).
  Batch padded(int64_t extra) const;
};

using Rng = std::mt19937_64;

enum class TaskFormat { Encoder, CausalLM, MaskedLM };
std::string format_name(TaskFormat format);  // encoder | causal_lm | masked_lm
TaskFormat parse_format(const std::string& name);  // std::invalid_argument on an unknown name

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t vocab_size() const = 0;   // input token ids: [0, vocab_size)
  virtual int64_t num_classes() const = 0;  // output classes: [0, num_classes)
  // Sequence length T of an example of input length `length`.
  virtual int64_t sequence_length(int64_t length) const = 0;
  // A training batch of `batch_size` examples of input length `length`.
  virtual Batch sample(int64_t batch_size, int64_t length, Rng& rng) const = 0;

  // The evaluation set at `length` holds evaluation_size(length, requested) examples;
  // evaluation_batch returns examples [first, first + count). Generated tasks draw fresh
  // examples from `rng` (the evaluation stream of that length); the text task reads
  // windows of its held-out split in file order.
  virtual int64_t evaluation_size(int64_t length, int64_t requested) const { return requested; }
  virtual Batch evaluation_batch(int64_t length, int64_t first, int64_t count, Rng& rng) const {
    return sample(count, length, rng);
  }
  // An evaluation condition beside the length that an eval setting varies (passkey: "depth",
  // set by eval.depths; flip_flop: "p_ignore", set by eval.p_ignore), or "" when the task has
  // none. Evaluation then makes one row per (length, value): condition_batch's examples.
  virtual std::string evaluation_condition() const { return ""; }
  // `count` evaluation examples at `length` with the condition at `value` (examples of the
  // evaluation stream `rng`, as evaluation_batch); the default throws (no condition).
  virtual Batch condition_batch(int64_t length, double value, int64_t count, Rng& rng) const;
  // Throws std::invalid_argument when `length` cannot be trained on (or evaluated at).
  virtual void check_length(int64_t length, bool training) const {}
  // Chance level (the best input-independent prediction): the most frequent target at each
  // position (algorithmic tasks, whose positions differ) or over all positions (text).
  virtual bool chance_per_position() const { return true; }
  // Language modeling on text: tables report bits per byte and perplexity, not sequences.
  virtual bool models_text() const { return false; }
  // How evaluation scores an example, in one line (the log and the run file).
  virtual std::string evaluation_protocol() const;

  TaskFormat format() const { return format_; }
  void set_format(TaskFormat format) { format_ = format; }
  // task.bos: a beginning-of-sequence token before every causal_lm example (Seq2SeqTask).
  bool bos() const { return bos_; }
  void set_bos(bool bos) { bos_ = bos; }

 private:
  TaskFormat format_ = TaskFormat::Encoder;
  bool bos_ = false;
};

// One example of a symbol-to-symbol task: input symbols in [0, input_symbols), output
// classes in [0, output_classes).
struct Example {
  std::vector<int64_t> input, output;
  std::vector<bool> scored;  // per output position; empty: all scored
};

// Token ids of both formats: 0 padding, 1 placeholder (encoder) or separator (causal_lm),
// 2 + s for input symbol s. In causal_lm, output class c is fed back as token 2 + c when
// the task's outputs are input symbols (copy, reverse, sort, addition digits), else as
// token 2 + input_symbols + c. Targets are output classes in both formats. With task.bos
// (causal_lm), every example starts with a beginning-of-sequence token, the last id of the
// vocabulary: counted in positions, scored nowhere (Kazemnejad et al.'s NoPE argument
// relies on it: uniform attention over a prefix that holds it gives 1 / (i + 1)).
class Seq2SeqTask : public Task {
 public:
  // Input and output alphabets; a copying task has output_classes == input_symbols.
  Seq2SeqTask(int64_t input_symbols, int64_t output_classes)
      : input_symbols_(input_symbols), output_classes_(output_classes) {}
  explicit Seq2SeqTask(int64_t alphabet_size) : Seq2SeqTask(alphabet_size, alphabet_size) {}
  static constexpr int64_t kPlaceholderToken = 1;
  static constexpr int64_t kSeparatorToken = 1;
  static constexpr int64_t kFirstSymbolToken = 2;
  static std::vector<std::string> formats() { return {"encoder", "causal_lm"}; }

  int64_t vocab_size() const override;
  int64_t num_classes() const override { return output_classes_; }
  int64_t sequence_length(int64_t length) const override;
  Batch sample(int64_t batch_size, int64_t length, Rng& rng) const override;
  std::string evaluation_protocol() const override;

  virtual Example generate(int64_t length, Rng& rng) const = 0;
  // An example with the evaluation condition at `value` (tasks with evaluation_condition()).
  virtual Example generate_at(int64_t length, double value, Rng& rng) const;
  Batch condition_batch(int64_t length, double value, int64_t count, Rng& rng) const override;
  virtual int64_t output_length(int64_t length) const = 0;
  // Input tokens of an example of `length` (modular_arithmetic shortens even lengths by one).
  virtual int64_t input_length(int64_t length) const { return length; }
  // True when output class c is input symbol c (the output copies or rearranges input symbols).
  virtual bool outputs_are_input_symbols() const { return false; }
  // True when the outputs rearrange (or repeat) the input symbols (copy, reverse, sort,
  // duplicate, odds first): a model without positions sees its output slots alike, so its best
  // is one symbol at every slot, the input's most frequent (the smallest of a tie); encode then
  // gives it as Batch::position_free, the position-free baseline (about 57% for uniform bits
  // at length 30, above the input-independent 50%).
  virtual bool outputs_rearrange_input() const { return false; }
  int64_t input_symbols() const { return input_symbols_; }
  // The token that stands for output class c in causal_lm sequences.
  int64_t output_token(int64_t output_class) const;
  // The beginning-of-sequence token (task.bos): the last id of vocab_size().
  int64_t bos_token() const;
  // Task-given positions (e.g. addition's `positions: abacus`): one per input token and one
  // per output token of an example with that many input and output tokens; empty when the
  // task leaves positions to the sampler (the default). BOS and separator tokens get 0.
  virtual std::pair<std::vector<int64_t>, std::vector<int64_t>> given_positions(int64_t input_tokens,
                                                                                int64_t output_tokens) const {
    return {};
  }
  // Encodes examples (all of the same input length) in this task's format.
  Batch encode(const std::vector<Example>& examples) const;

 protected:
  // `length` symbols uniform over [0, symbols) (default: the whole input alphabet).
  std::vector<int64_t> random_symbols(int64_t length, Rng& rng, int64_t symbols = 0) const;

 private:
  int64_t input_symbols_, output_classes_;
};

}  // namespace pelab
