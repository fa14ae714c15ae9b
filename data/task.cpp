#include "data/task.h"

#include <algorithm>

#include "core/encodings/host_to_device.h"

#include <stdexcept>

namespace pelab {

Batch Batch::to(torch::Device device) const {
  Batch b = *this;
  b.tokens = host_to_device(tokens, device);
  b.padding = host_to_device(padding, device);
  b.targets = host_to_device(targets, device);
  b.scored = host_to_device(scored, device);
  b.segments = host_to_device(segments, device);
  if (positions.defined()) b.positions = host_to_device(positions, device);
  if (position_free.defined()) b.position_free = host_to_device(position_free, device);
  return b;
}

Batch Batch::padded(int64_t extra) const {
  Batch b = *this;
  const int64_t B = tokens.size(0);
  auto pad_with = [&](const torch::Tensor& t, double value) {
    return torch::cat({t, torch::full({B, extra}, value, t.options())}, 1);
  };
  b.tokens = pad_with(tokens, 0);
  b.padding = pad_with(padding, 1);
  b.targets = pad_with(targets, 0);
  b.scored = pad_with(scored, 0);
  b.segments = pad_with(segments, 0);
  if (positions.defined()) b.positions = pad_with(positions, 0);
  if (position_free.defined()) b.position_free = pad_with(position_free, 0);
  return b;
}

std::vector<int64_t> Seq2SeqTask::random_symbols(int64_t length, Rng& rng, int64_t symbols) const {
  std::uniform_int_distribution<int64_t> symbol(0, (symbols > 0 ? symbols : input_symbols_) - 1);
  std::vector<int64_t> out(length);
  for (auto& s : out) s = symbol(rng);
  return out;
}

std::string format_name(TaskFormat format) {
  switch (format) {
    case TaskFormat::Encoder: return "encoder";
    case TaskFormat::CausalLM: return "causal_lm";
    case TaskFormat::MaskedLM: return "masked_lm";
  }
  return "?";
}

TaskFormat parse_format(const std::string& name) {
  for (TaskFormat f : {TaskFormat::Encoder, TaskFormat::CausalLM, TaskFormat::MaskedLM})
    if (format_name(f) == name) return f;
  throw std::invalid_argument("unknown task format '" + name + "'; expected encoder, causal_lm or masked_lm");
}

std::string Task::evaluation_protocol() const { return format_name(format()); }

int64_t Seq2SeqTask::bos_token() const {
  const bool extra_output_tokens = format() == TaskFormat::CausalLM && !outputs_are_input_symbols();
  return kFirstSymbolToken + input_symbols_ + (extra_output_tokens ? output_classes_ : 0);
}

int64_t Seq2SeqTask::vocab_size() const { return bos_token() + (bos() ? 1 : 0); }

int64_t Seq2SeqTask::sequence_length(int64_t length) const {
  const int64_t separator = format() == TaskFormat::CausalLM ? 1 : 0;
  return (bos() ? 1 : 0) + input_length(length) + separator + output_length(length);
}

int64_t Seq2SeqTask::output_token(int64_t output_class) const {
  return kFirstSymbolToken + (outputs_are_input_symbols() ? 0 : input_symbols_) + output_class;
}

std::string Seq2SeqTask::evaluation_protocol() const {
  if (format() == TaskFormat::CausalLM)
    return std::string("causal_lm: ") + (bos() ? "BOS, " : "") +
           "input, separator, output; next-token prediction scored on the output tokens "
           "(teacher forcing; sequence accuracy = greedy exact match)";
  return "encoder: input, then one placeholder per output token, scored at the placeholders";
}

Batch Seq2SeqTask::sample(int64_t batch_size, int64_t length, Rng& rng) const {
  std::vector<Example> examples;
  examples.reserve(batch_size);
  for (int64_t i = 0; i < batch_size; ++i) examples.push_back(generate(length, rng));
  Batch b = encode(examples);
  b.length = length;
  return b;
}

namespace {
constexpr const char* kNoCondition = "this task has no evaluation condition (eval.depths: passkey; eval.p_ignore: flip_flop)";
}  // namespace

Batch Task::condition_batch(int64_t length, double value, int64_t count, Rng& rng) const {
  throw std::invalid_argument(kNoCondition);
}

Example Seq2SeqTask::generate_at(int64_t length, double value, Rng& rng) const { throw std::invalid_argument(kNoCondition); }

Batch Seq2SeqTask::condition_batch(int64_t length, double value, int64_t count, Rng& rng) const {
  std::vector<Example> examples;
  examples.reserve(count);
  for (int64_t i = 0; i < count; ++i) examples.push_back(generate_at(length, value, rng));
  Batch b = encode(examples);
  b.length = length;
  return b;
}

Batch Seq2SeqTask::encode(const std::vector<Example>& examples) const {
  TORCH_CHECK(!examples.empty(), "Seq2SeqTask::encode: no examples");
  const bool lm = format() == TaskFormat::CausalLM;
  const int64_t B = examples.size();
  const int64_t n_in = examples[0].input.size(), n_out = examples[0].output.size();
  // encoder: [input, placeholders]; the output targets sit on the placeholders.
  // causal_lm: [input, separator, output]; position n_in + k (the separator, then output
  // token k - 1) predicts output token k; the last output token predicts nothing.
  // task.bos: everything one position later, after the BOS token
  const int64_t first = bos() ? 1 : 0;
  const int64_t output_start = first + n_in + (lm ? 1 : 0), T = output_start + n_out;
  auto tokens = torch::zeros({B, T}, torch::kInt64);
  auto targets = torch::zeros({B, T}, torch::kInt64);
  auto scored = torch::zeros({B, T}, torch::kBool);
  auto segments = torch::zeros({B, T}, torch::kInt64);
  auto tok = tokens.accessor<int64_t, 2>();
  auto tgt = targets.accessor<int64_t, 2>();
  auto sc = scored.accessor<bool, 2>();
  auto seg = segments.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const Example& e = examples[b];
    TORCH_CHECK(static_cast<int64_t>(e.input.size()) == n_in && static_cast<int64_t>(e.output.size()) == n_out,
                "Seq2SeqTask::encode: examples of one batch must have equal lengths");
    if (bos()) tok[b][0] = bos_token();
    for (int64_t t = 0; t < n_in; ++t) tok[b][first + t] = kFirstSymbolToken + e.input[t];
    if (lm) {
      tok[b][first + n_in] = kSeparatorToken;
      seg[b][first + n_in] = 1;
    }
    for (int64_t k = 0; k < n_out; ++k) {
      // placeholder k (encoder), or the token before output k (causal_lm): position n_in + k
      // either way (after the BOS token, if any)
      const int64_t target_position = first + n_in + k;
      tok[b][output_start + k] = lm ? output_token(e.output[k]) : kPlaceholderToken;
      seg[b][output_start + k] = 1;
      tgt[b][target_position] = e.output[k];
      sc[b][target_position] = e.scored.empty() || e.scored[k];
    }
  }
  Batch batch;
  const auto [input_positions, output_positions] = given_positions(n_in, n_out);
  if (!input_positions.empty()) {
    TORCH_CHECK(static_cast<int64_t>(input_positions.size()) == n_in &&
                    static_cast<int64_t>(output_positions.size()) == n_out,
                "Seq2SeqTask::encode: given positions do not match the example's tokens");
    auto positions = torch::zeros({B, T}, torch::kInt64);  // BOS and separator: 0
    for (int64_t t = 0; t < n_in; ++t) positions.select(1, first + t).fill_(input_positions[t]);
    for (int64_t k = 0; k < n_out; ++k) positions.select(1, output_start + k).fill_(output_positions[k]);
    batch.positions = positions;
  }
  if (outputs_rearrange_input()) {
    auto free = torch::zeros({B, T}, torch::kInt64);
    auto pf = free.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& input = examples[b].input;
      std::vector<int64_t> counts(input_symbols_, 0);
      for (int64_t s : input) ++counts[s];
      const int64_t majority = std::max_element(counts.begin(), counts.end()) - counts.begin();  // the first of a tie
      for (int64_t k = 0; k < n_out; ++k) pf[b][first + n_in + k] = majority;
    }
    batch.position_free = free;
  }
  batch.tokens = tokens;
  batch.padding = torch::zeros({B, T}, torch::kBool);
  batch.targets = targets;
  batch.scored = scored;
  batch.segments = segments;
  batch.length = n_in;
  return batch;
}

}  // namespace pelab
