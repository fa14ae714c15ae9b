#include "data/task.h"

namespace pelab {

Batch Batch::to(torch::Device device) const {
  Batch b = *this;
  b.tokens = tokens.to(device);
  b.padding = padding.to(device);
  b.targets = targets.to(device);
  b.scored = scored.to(device);
  b.segments = segments.to(device);
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
  return b;
}

std::vector<int64_t> Seq2SeqTask::random_symbols(int64_t length, Rng& rng, int64_t symbols) const {
  std::uniform_int_distribution<int64_t> symbol(0, (symbols > 0 ? symbols : input_symbols_) - 1);
  std::vector<int64_t> out(length);
  for (auto& s : out) s = symbol(rng);
  return out;
}

Batch Seq2SeqTask::sample(int64_t batch_size, int64_t length, Rng& rng) const {
  std::vector<Example> examples;
  examples.reserve(batch_size);
  for (int64_t i = 0; i < batch_size; ++i) examples.push_back(generate(length, rng));
  Batch b = encode_examples(examples);
  b.length = length;
  return b;
}

Batch encode_examples(const std::vector<Example>& examples) {
  TORCH_CHECK(!examples.empty(), "encode_examples: no examples");
  const int64_t B = examples.size();
  const int64_t n_in = examples[0].input.size(), n_out = examples[0].output.size(), T = n_in + n_out;
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
                "encode_examples: examples of one batch must have equal lengths");
    for (int64_t t = 0; t < n_in; ++t) tok[b][t] = Seq2SeqTask::kFirstSymbolToken + e.input[t];
    for (int64_t t = 0; t < n_out; ++t) {
      tok[b][n_in + t] = Seq2SeqTask::kPlaceholderToken;
      tgt[b][n_in + t] = e.output[t];
      sc[b][n_in + t] = e.scored.empty() || e.scored[t];
      seg[b][n_in + t] = 1;
    }
  }
  Batch batch;
  batch.tokens = tokens;
  batch.padding = torch::zeros({B, T}, torch::kBool);
  batch.targets = targets;
  batch.scored = scored;
  batch.segments = segments;
  batch.length = n_in;
  return batch;
}

}  // namespace pelab
