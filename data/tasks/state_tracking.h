// `state_tracking`: the word problem of a permutation group (Merrill, Petty & Sabharwal 2024,
// "The Illusion of State in State-Space Models"; the S5 / A5 benchmark of PaTH and
// DeltaProduct). The input is a sequence of group elements g_1 ... g_n; the output at every
// position t is the running product s_t = g_1 g_2 ... g_t, composed left to right (apply g_1
// first: (a b)(x) = b(a(x))). S5 is not solvable: a fixed-depth transformer cannot track it
// at every length (the paper's point); A5 neither; S3 and A4 are solvable.
// Elements are numbered by the lexicographic order of their images (p(0), ..., p(n-1)) among
// the group's elements; 0 is the identity. Input symbols and output classes: the elements.
#pragma once

#include <vector>

#include "core/config/options.h"
#include "data/task.h"

namespace pelab {

class StateTrackingTask : public Seq2SeqTask {
 public:
  explicit StateTrackingTask(const OptionValues& options);
  static std::string description();
  static std::vector<OptionSpec> options();

  Example generate(int64_t length, Rng& rng) const override;
  int64_t output_length(int64_t length) const override { return length; }
  bool outputs_are_input_symbols() const override { return true; }

  // The group's elements as images, element id -> (p(0), ..., p(n-1)).
  const std::vector<std::vector<int>>& elements() const { return elements_; }
  // The id of a then b (apply a first).
  int64_t compose(int64_t a, int64_t b) const { return table_[a * elements_.size() + b]; }

 private:
  std::vector<std::vector<int>> elements_;
  std::vector<int64_t> table_;  // |G| x |G| products
};

// The elements of a group named s3 | a4 | a5 | s5, as images, in lexicographic order.
std::vector<std::vector<int>> permutation_group(const std::string& name);

}  // namespace pelab
