#include "data/tasks/ngram_lookup.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace pelab {

NgramLookupTask::NgramLookupTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("vocab_size") + 1, options.get_int("vocab_size")),
      vocab_(options.get_int("vocab_size")),
      n_(options.get_int("n")),
      answer_(options.get_int("answer")),
      prefix_(options.get_string("variant") == "prefix") {}

std::string NgramLookupTask::description() {
  return "n-gram lookup (Jelassi et al. 2024, Repeat After Me): output what follows a given n-gram of the string; "
         "length = string symbols";
}

std::vector<OptionSpec> NgramLookupTask::options() {
  return {OptionSpec::integer("vocab_size", 26, "string symbols (the paper: 26)", 2, 1 << 20),
          OptionSpec::integer("n", 3, "symbols of the key n-gram (the paper: 3)", 1, 64),
          OptionSpec::integer("answer", 5, "symbols of the answer that follow the n-gram", 1, 1 << 20),
          OptionSpec::choice("variant", "suffix", {"prefix", "suffix"},
                             "prefix: n-gram, separator, string; suffix: string, separator, n-gram")};
}

void NgramLookupTask::check_length(int64_t length, bool training) const {
  if (length < n_ + answer_)
    throw std::invalid_argument(fmt::format("ngram_lookup: a string of {} symbols cannot hold a {}-gram and its answer "
                                            "of {} (at least {})", length, n_, answer_, n_ + answer_));
}

Example NgramLookupTask::generate(int64_t length, Rng& rng) const {
  // Strings until one has an n-gram that occurs once and leaves room for the answer after it;
  // with 26 symbols and trigrams the first string nearly always does.
  const int64_t starts = length - n_ - answer_ + 1;  // n-gram starts whose answer fits
  std::vector<int64_t> string, unique;
  for (int attempt = 0; unique.empty(); ++attempt) {
    if (attempt == 1000)
      throw std::runtime_error(fmt::format("ngram_lookup: no {}-gram occurs once in 1000 strings of {} symbols over {}: "
                                           "raise task.vocab_size or task.n", n_, length, vocab_));
    string = random_symbols(length, rng, vocab_);
    for (int64_t s = 0; s < starts; ++s) {
      int occurrences = 0;
      for (int64_t t = 0; t + n_ <= length && occurrences < 2; ++t)
        occurrences += std::equal(string.begin() + s, string.begin() + s + n_, string.begin() + t);
      if (occurrences == 1) unique.push_back(s);
    }
  }
  const int64_t start = unique[std::uniform_int_distribution<size_t>(0, unique.size() - 1)(rng)];
  const std::vector<int64_t> ngram(string.begin() + start, string.begin() + start + n_);
  Example e;
  const std::vector<int64_t>& first = prefix_ ? ngram : string;
  const std::vector<int64_t>& second = prefix_ ? string : ngram;
  e.input = first;
  e.input.push_back(separator());
  e.input.insert(e.input.end(), second.begin(), second.end());
  e.output.assign(string.begin() + start + n_, string.begin() + start + n_ + answer_);
  return e;
}

}  // namespace pelab
