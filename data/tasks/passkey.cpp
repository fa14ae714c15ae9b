#include "data/tasks/passkey.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace pelab {

PasskeyTask::PasskeyTask(const OptionValues& options)
    : Seq2SeqTask(kDigits + options.get_int("filler_symbols") + 2, kDigits),
      digits_(options.get_int("digits")),
      filler_symbols_(options.get_int("filler_symbols")),
      random_filler_(options.get_string("filler") == "random") {}

std::string PasskeyTask::description() {
  return "passkey retrieval (Mohtashami & Jaggi 2023): k digits hidden at a depth in filler, asked for at the end; "
         "length = input tokens; eval.depths";
}

std::vector<OptionSpec> PasskeyTask::options() {
  return {OptionSpec::integer("digits", 5, "digits of the passkey (the paper: N in 1-50000)", 1, 64),
          OptionSpec::integer("filler_symbols", 5, "distinct filler tokens", 1, 1 << 16),
          OptionSpec::choice("filler", "repeated", {"repeated", "random"},
                             "repeated: one phrase of filler_symbols tokens over and over (the paper's repeated "
                             "sentences); random: uniform filler tokens")};
}

void PasskeyTask::check_length(int64_t length, bool training) const {
  if (fillers(length) < 0)
    throw std::invalid_argument(fmt::format("passkey: length {} cannot hold the key marker, {} digits and the query "
                                            "(at least {} tokens)", length, digits_, digits_ + 2));
}

Example PasskeyTask::generate(int64_t length, Rng& rng) const {
  return example(length, std::uniform_int_distribution<int64_t>(0, fillers(length))(rng), rng);
}

Example PasskeyTask::generate_at(int64_t length, double depth, Rng& rng) const {
  return example(length, std::llround(depth * double(fillers(length))), rng);
}

Example PasskeyTask::example(int64_t length, int64_t before, Rng& rng) const {
  Example e;
  e.output = random_symbols(digits_, rng, kDigits);
  std::uniform_int_distribution<int64_t> filler(0, filler_symbols_ - 1);
  // the phrase continues across the key, as the paper's sentences do around it
  auto filler_token = [&](int64_t index) { return kDigits + (random_filler_ ? filler(rng) : index % filler_symbols_); };
  for (int64_t f = 0; f < before; ++f) e.input.push_back(filler_token(f));
  e.input.push_back(key_marker());
  e.input.insert(e.input.end(), e.output.begin(), e.output.end());
  for (int64_t f = before; f < fillers(length); ++f) e.input.push_back(filler_token(f));
  e.input.push_back(query());
  return e;
}

}  // namespace pelab
