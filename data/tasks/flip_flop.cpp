#include "data/tasks/flip_flop.h"

#include <fmt/format.h>

#include <stdexcept>

namespace pelab {

FlipFlopTask::FlipFlopTask(const OptionValues& options) : Seq2SeqTask(5, 2), p_ignore_(options.get_float("p_ignore")) {}

std::string FlipFlopTask::description() {
  return "flip-flop language (Liu et al. 2023): write / ignore / read a bit, reads return the last write; "
         "length = instructions; eval.p_ignore";
}

std::vector<OptionSpec> FlipFlopTask::options() {
  return {OptionSpec::real("p_ignore", 0.8, "training probability of an ignore instruction (the paper: 0.8)", 0.0, 0.999)};
}

void FlipFlopTask::check_length(int64_t length, bool training) const {
  if (length < 2)
    throw std::invalid_argument(fmt::format("flip_flop: length {} cannot hold the first write and the last read", length));
}

Example FlipFlopTask::generate_at(int64_t length, double p_ignore, Rng& rng) const {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::bernoulli_distribution bit(0.5);
  Example e;
  e.output.assign(length, 0);
  e.scored.assign(length, false);
  int64_t memory = 0;
  for (int64_t t = 0; t < length; ++t) {
    // the first instruction writes, the last reads; between them ignore with p_ignore,
    // else write or read alike
    const double u = uniform(rng);
    const bool write = t == 0 || (t + 1 < length && u >= p_ignore && u < p_ignore + (1 - p_ignore) / 2);
    const bool read = t + 1 == length || (t > 0 && !write && u >= p_ignore + (1 - p_ignore) / 2);
    if (read) {
      e.input.push_back(kRead);
      e.output[t] = memory;
      e.scored[t] = true;
    } else {
      const int64_t b = bit(rng);
      if (write) memory = b;
      e.input.push_back((write ? kWrite0 : kIgnore0) + b);
    }
  }
  return e;
}

}  // namespace pelab
