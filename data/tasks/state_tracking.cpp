#include "data/tasks/state_tracking.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

namespace pelab {

std::vector<std::vector<int>> permutation_group(const std::string& name) {
  const int n = name.at(1) - '0';
  const bool even_only = name.at(0) == 'a';
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::vector<std::vector<int>> elements;
  do {
    int inversions = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) inversions += p[i] > p[j];
    if (!even_only || inversions % 2 == 0) elements.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  return elements;
}

namespace {

int64_t group_size(const OptionValues& options) {
  return static_cast<int64_t>(permutation_group(options.get_string("group")).size());
}

}  // namespace

StateTrackingTask::StateTrackingTask(const OptionValues& options)
    : Seq2SeqTask(group_size(options)), elements_(permutation_group(options.get_string("group"))) {
  std::map<std::vector<int>, int64_t> id;
  for (size_t i = 0; i < elements_.size(); ++i) id[elements_[i]] = static_cast<int64_t>(i);
  const size_t G = elements_.size(), n = elements_.front().size();
  table_.resize(G * G);
  for (size_t a = 0; a < G; ++a)
    for (size_t b = 0; b < G; ++b) {
      std::vector<int> product(n);
      for (size_t x = 0; x < n; ++x) product[x] = elements_[b][elements_[a][x]];  // a, then b
      table_[a * G + b] = id.at(product);
    }
}

std::string StateTrackingTask::description() {
  return "the running product of permutations at every position (S5 / A5 word problems, Merrill et al. 2024)";
}

std::vector<OptionSpec> StateTrackingTask::options() {
  return {OptionSpec::choice("group", "s5", {"s3", "a4", "a5", "s5"},
                             "the permutation group: s5 (120 elements), a5 (60), a4 (12), s3 (6)")};
}

Example StateTrackingTask::generate(int64_t length, Rng& rng) const {
  Example e;
  e.input = random_symbols(length, rng);
  int64_t state = 0;  // the identity
  for (int64_t g : e.input) {
    state = compose(state, g);
    e.output.push_back(state);
  }
  return e;
}

}  // namespace pelab
