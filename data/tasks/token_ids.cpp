#include "data/tasks/token_ids.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace pelab {

TokenIdsTask::TokenIdsTask(const OptionValues& options)
    : vocab_size_(options.get_int("vocab_size")),
      first_id_(options.get_int("first_id")),
      last_id_(options.get_int("last_id")),
      cls_id_(options.get_int("cls_id")),
      sep_id_(options.get_int("sep_id")),
      path_(options.get_string("file")) {
  if (last_id_ < 0) last_id_ = vocab_size_ - 1;
  const auto check_id = [&](const char* what, int64_t id, bool optional) {
    if ((optional && id < 0) || (id >= 0 && id < vocab_size_)) return;
    throw std::invalid_argument(fmt::format("task.options.{} = {} is not an id of the vocabulary [0, {})", what, id,
                                            vocab_size_));
  };
  check_id("first_id", first_id_, false);
  check_id("last_id", last_id_, false);
  check_id("cls_id", cls_id_, true);
  check_id("sep_id", sep_id_, true);
  if (first_id_ > last_id_)
    throw std::invalid_argument(fmt::format("task.options.first_id = {} is above last_id = {}", first_id_, last_id_));
  if (path_.empty()) return;
  std::ifstream in(path_);
  if (!in) throw std::runtime_error("token_ids: cannot read " + path_);
  int64_t id = 0;
  while (in >> id) {
    if (id < 0 || id >= vocab_size_)
      throw std::runtime_error(fmt::format("token_ids: {} holds id {}, outside the vocabulary [0, {})", path_, id,
                                           vocab_size_));
    ids_.push_back(id);
  }
  if (!in.eof()) throw std::runtime_error("token_ids: " + path_ + " holds something other than integer ids");
  if (ids_.empty()) throw std::runtime_error("token_ids: " + path_ + " holds no ids");
}

std::string TokenIdsTask::description() {
  return "a tokenizer's ids (uniform, or windows of a file of ids), each scored as its own target: for imported "
         "models (pelab import-hf)";
}

std::vector<OptionSpec> TokenIdsTask::options() {
  return {
      OptionSpec::integer("vocab_size", 30522, "token ids are [0, vocab_size) (BERT: 30522); 0 is padding", 2, 1 << 24),
      OptionSpec::integer("first_id", 1, "uniform ids: the smallest drawn", 0, 1 << 24),
      OptionSpec::integer("last_id", -1, "uniform ids: the largest drawn (-1: vocab_size - 1)", -1, 1 << 24),
      OptionSpec::integer("cls_id", -1, "an id before every sequence (BERT's [CLS]: 101); -1: none", -1, 1 << 24),
      OptionSpec::integer("sep_id", -1, "an id after every sequence (BERT's [SEP]: 102); -1: none", -1, 1 << 24),
      OptionSpec::text("file", "", "whitespace-separated token ids, read as one stream of windows; empty: uniform ids"),
  };
}

Batch TokenIdsTask::empty_batch(int64_t rows, int64_t length) const {
  const int64_t T = sequence_length(length);
  Batch b;
  b.tokens = torch::zeros({rows, T}, torch::kInt64);
  b.padding = torch::zeros({rows, T}, torch::kBool);
  b.targets = torch::zeros({rows, T}, torch::kInt64);
  b.scored = torch::ones({rows, T}, torch::kBool);
  b.segments = torch::zeros({rows, T}, torch::kInt64);
  b.length = length;
  return b;
}

void TokenIdsTask::fill_row(Batch& batch, int64_t row, const int64_t* body, int64_t length) const {
  auto tokens = batch.tokens.accessor<int64_t, 2>();
  int64_t t = 0;
  if (cls_id_ >= 0) tokens[row][t++] = cls_id_;
  for (int64_t i = 0; i < length; ++i) tokens[row][t++] = body[i];
  if (sep_id_ >= 0) tokens[row][t++] = sep_id_;
  batch.targets[row].copy_(batch.tokens[row]);
}

Batch TokenIdsTask::sample(int64_t batch_size, int64_t length, Rng& rng) const {
  Batch b = empty_batch(batch_size, length);
  std::vector<int64_t> body(length);
  std::uniform_int_distribution<int64_t> uniform_id(first_id_, last_id_);
  std::uniform_int_distribution<int64_t> offset(0, ids_.empty() ? 0 : static_cast<int64_t>(ids_.size()) - length);
  for (int64_t row = 0; row < batch_size; ++row) {
    if (ids_.empty()) {
      for (auto& id : body) id = uniform_id(rng);
      fill_row(b, row, body.data(), length);
    } else {
      fill_row(b, row, ids_.data() + offset(rng), length);
    }
  }
  return b;
}

int64_t TokenIdsTask::evaluation_size(int64_t length, int64_t requested) const {
  if (ids_.empty()) return requested;
  return std::min<int64_t>(requested, static_cast<int64_t>(ids_.size()) / length);
}

Batch TokenIdsTask::evaluation_batch(int64_t length, int64_t first, int64_t count, Rng& rng) const {
  if (ids_.empty()) return sample(count, length, rng);
  Batch b = empty_batch(count, length);
  for (int64_t row = 0; row < count; ++row) fill_row(b, row, ids_.data() + (first + row) * length, length);
  return b;
}

void TokenIdsTask::check_length(int64_t length, bool training) const {
  if (!ids_.empty() && length > static_cast<int64_t>(ids_.size()))
    throw std::invalid_argument(fmt::format("length {} is longer than the {} ids of {}", length, ids_.size(), path_));
}

std::string TokenIdsTask::evaluation_protocol() const {
  const std::string source = ids_.empty() ? fmt::format("ids uniform over [{}, {}]", first_id_, last_id_)
                                          : fmt::format("non-overlapping windows of the {} ids of {}", ids_.size(), path_);
  std::string wrap;
  if (cls_id_ >= 0) wrap += fmt::format(", after {}", cls_id_);
  if (sep_id_ >= 0) wrap += fmt::format(", before {}", sep_id_);
  return source + wrap + "; every token scored as its own target";
}

}  // namespace pelab
