#include "data/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace pelab {

int64_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const int64_t n = static_cast<int64_t>(text.size());
  for (int64_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int64_t extra = 0;
    uint32_t code = 0, min_code = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { extra = 1; code = c & 0x1F; min_code = 0x80; }
    else if ((c & 0xF0) == 0xE0) { extra = 2; code = c & 0x0F; min_code = 0x800; }
    else if ((c & 0xF8) == 0xF0) { extra = 3; code = c & 0x07; min_code = 0x10000; }
    else return i;
    if (i + extra >= n) return i;  // truncated sequence
    for (int64_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    // overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8
    if (code < min_code || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return i;
    i += extra + 1;
  }
  return -1;
}

TextTask::TextTask(const OptionValues& options)
    : path_(options.get_string("path")),
      window_(options.get_string("window")),
      stride_(options.get_int("stride")),
      mask_rate_(options.get_float("mask_rate")) {
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    throw std::runtime_error("text: cannot open '" + path_ + "'" +
                             (path_ == kDefaultCorpus
                                  ? std::string("; it comes with the Debian package fortunes (scripts/setup-deps.sh "
                                                "installs it), or set task.path to any UTF-8 file")
                                  : std::string("; set task.path to a readable UTF-8 file")));
  std::stringstream content;
  content << in.rdbuf();
  bytes_ = content.str();
  if (bytes_.empty()) throw std::runtime_error("text: '" + path_ + "' is empty");
  const int64_t invalid = first_invalid_utf8(bytes_);
  if (invalid >= 0)
    throw std::runtime_error(fmt::format("text: '{}' is not UTF-8 text (invalid byte 0x{:02x} at offset {})", path_,
                                         static_cast<unsigned char>(bytes_[invalid]), invalid));
  const int64_t held_out = std::llround(options.get_float("holdout") * static_cast<double>(size()));
  split_ = size() - std::max<int64_t>(1, held_out);
}

std::string TextTask::description() {
  return "bytes of a UTF-8 file: causal LM (bits per byte beyond the training length) or BERT masked LM";
}

std::vector<OptionSpec> TextTask::options() {
  return {OptionSpec::text("path", kDefaultCorpus, "the UTF-8 text file (default: English verse from Debian's fortunes)"),
          OptionSpec::real("holdout", 0.1, "fraction at the end of the file held out for evaluation", 0.001, 0.9),
          OptionSpec::choice("window", "sliding", {"sliding", "nonoverlapping"},
                             "causal_lm evaluation windows: sliding (score the last `stride` bytes) or non-overlapping"),
          OptionSpec::integer("stride", 64, "sliding windows: bytes scored per window and between windows", 1, 1 << 24),
          OptionSpec::real("mask_rate", 0.15, "masked_lm: fraction of positions predicted (80/10/10)", 0.001, 1.0)};
}

int64_t TextTask::window_bytes(int64_t length) const {
  return length + (format() == TaskFormat::CausalLM ? 1 : 0);
}

void TextTask::check_length(int64_t length, bool training) const {
  const int64_t held_out = size() - split_;
  std::string problem;
  if (training && window_bytes(length) > split_) {
    problem = fmt::format("training windows of {} bytes do not fit the training split ({} bytes)", length, split_);
  } else if (!training && format() == TaskFormat::MaskedLM && length > held_out) {
    problem = fmt::format("evaluation windows of {} bytes do not fit the held-out split ({} bytes)", length, held_out);
  } else if (!training && format() == TaskFormat::CausalLM) {
    const int64_t scored = evaluation_scored_positions(length);
    if (scored > held_out)
      problem = fmt::format("evaluation windows of {} bytes do not fit the held-out split ({} bytes)", length, held_out);
    else if (evaluation_window_start(length, 0) < 0)  // the first window's context starts before the file
      problem = fmt::format("evaluation windows of {} bytes need {} bytes of context before the held-out split, "
                            "which has {}", length, length + 1 - scored, split_);
  }
  if (!problem.empty())
    throw std::invalid_argument(fmt::format("text: {} of '{}'; use a larger file or change task.holdout", problem, path_));
}

int64_t TextTask::evaluation_scored_positions(int64_t length) const {
  if (format() == TaskFormat::CausalLM && window_ == "sliding") return std::min(stride_, length);
  return length;
}

// causal_lm: window i predicts held-out bytes [split + i s, split + (i + 1) s) with its last s
// positions (s = scored positions), so every length scores the same bytes; its first
// tokens may be context from before the split (never a target). masked_lm: window i is
// held-out bytes [split + i L, split + (i + 1) L).
int64_t TextTask::evaluation_window_start(int64_t length, int64_t index) const {
  if (format() == TaskFormat::MaskedLM) return split_ + index * length;
  return split_ + (index + 1) * evaluation_scored_positions(length) - length - 1;
}

int64_t TextTask::evaluation_size(int64_t length, int64_t requested) const {
  const int64_t held_out = size() - split_;
  if (evaluation_window_start(length, 0) < 0) return 0;
  return std::min(requested, held_out / evaluation_scored_positions(length));
}

int64_t TextTask::training_window_start(int64_t length, Rng& rng) const {
  return std::uniform_int_distribution<int64_t>(0, split_ - window_bytes(length))(rng);
}

Batch TextTask::empty_batch(int64_t rows, int64_t length) const {
  Batch b;
  b.tokens = torch::zeros({rows, length}, torch::kInt64);
  b.padding = torch::zeros({rows, length}, torch::kBool);
  b.targets = torch::zeros({rows, length}, torch::kInt64);
  b.scored = torch::zeros({rows, length}, torch::kBool);
  b.segments = torch::zeros({rows, length}, torch::kInt64);
  b.length = length;
  return b;
}

void TextTask::fill_window(int64_t row, int64_t start, int64_t length, int64_t scored_from, Rng& rng,
                           Batch& batch) const {
  auto tok = batch.tokens.accessor<int64_t, 2>();
  auto tgt = batch.targets.accessor<int64_t, 2>();
  auto sc = batch.scored.accessor<bool, 2>();
  auto byte_at = [&](int64_t offset) { return static_cast<int64_t>(static_cast<unsigned char>(bytes_[offset])); };
  for (int64_t t = 0; t < length; ++t) tok[row][t] = kFirstByteToken + byte_at(start + t);
  if (format() == TaskFormat::CausalLM) {
    for (int64_t t = scored_from; t < length; ++t) {
      tgt[row][t] = byte_at(start + t + 1);
      sc[row][t] = true;
    }
    return;
  }
  // masked_lm: a uniform choice of `predicted` distinct positions (partial Fisher-Yates)
  const int64_t predicted = std::clamp<int64_t>(std::llround(mask_rate_ * double(length)), 1, length);
  std::vector<int64_t> order(length);
  for (int64_t t = 0; t < length; ++t) order[t] = t;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int64_t> random_byte(0, 255);
  for (int64_t k = 0; k < predicted; ++k) {
    std::swap(order[k], order[std::uniform_int_distribution<int64_t>(k, length - 1)(rng)]);
    const int64_t t = order[k];
    tgt[row][t] = byte_at(start + t);
    sc[row][t] = true;
    const double u = unit(rng);
    if (u < 0.8) tok[row][t] = kMaskToken;
    else if (u < 0.9) tok[row][t] = kFirstByteToken + random_byte(rng);
  }
}

Batch TextTask::sample(int64_t batch_size, int64_t length, Rng& rng) const {
  Batch b = empty_batch(batch_size, length);
  for (int64_t row = 0; row < batch_size; ++row) fill_window(row, training_window_start(length, rng), length, 0, rng, b);
  return b;
}

Batch TextTask::evaluation_batch(int64_t length, int64_t first, int64_t count, Rng& rng) const {
  Batch b = empty_batch(count, length);
  const int64_t scored_from = length - evaluation_scored_positions(length);
  for (int64_t row = 0; row < count; ++row)
    fill_window(row, evaluation_window_start(length, first + row), length, scored_from, rng, b);
  return b;
}

std::string TextTask::evaluation_protocol() const {
  const std::string where = fmt::format("held-out bytes [{}, {}) of {}", split_, size(), path_);
  if (format() == TaskFormat::MaskedLM)
    return fmt::format("masked_lm on {}: non-overlapping windows, {:g}% of positions predicted "
                       "(80% [MASK], 10% random byte, 10% unchanged)", where, 100 * mask_rate_);
  if (window_ == "sliding")
    return fmt::format("causal_lm on {}, in file order: sliding windows of L bytes advancing by {} bytes, each "
                       "scoring its last {} (context >= L - {}; the same bytes at every L >= {}; "
                       "an L below {} scores all its bytes, windows advancing by L)",
                       where, stride_, stride_, stride_ - 1, stride_, stride_);
  return fmt::format("causal_lm on {}, in file order: non-overlapping windows of L bytes, every byte scored "
                     "(context 1 to L)", where);
}

}  // namespace pelab
