#include "data/tasks/induction_heads.h"

#include <stdexcept>

namespace pelab {

InductionHeadsTask::InductionHeadsTask(const OptionValues& options)
    : Seq2SeqTask(options.get_int("vocab_size") + 1, options.get_int("vocab_size")),
      vocab_(options.get_int("vocab_size")) {}

std::string InductionHeadsTask::description() {
  return "recall the token after a trigger when the trigger comes again at the end (Mamba's induction heads)";
}

std::vector<OptionSpec> InductionHeadsTask::options() {
  return {OptionSpec::integer("vocab_size", 16, "tokens besides the trigger (Mamba: 16)", 2, 1 << 20)};
}

void InductionHeadsTask::check_length(int64_t length, bool training) const {
  if (length < 3) throw std::invalid_argument("induction_heads needs at least 3 tokens: trigger, token, trigger");
}

Example InductionHeadsTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng, vocab_);  // no trigger among them
  std::uniform_int_distribution<int64_t> where(0, length - 3);
  const int64_t first = where(rng);
  e.input[first] = trigger();
  e.input[length - 1] = trigger();
  e.output = {e.input[first + 1]};
  return e;
}

}  // namespace pelab
