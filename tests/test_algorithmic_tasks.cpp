// The Deletang et al. / Ruoss et al. algorithmic tasks: every registered task obeys its
// length laws and alphabets and is reproducible; each task's outputs are checked by an
// independent computation on generated examples.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>

#include "tests/support.h"

using namespace pelab;

namespace {

const Seq2SeqTask& seq2seq(const std::unique_ptr<Task>& task) {
  auto* s = dynamic_cast<const Seq2SeqTask*>(task.get());
  if (!s) throw std::logic_error("not a sequence-to-sequence task");
  return *s;
}

// Little-endian bits -> integer (small lengths only).
uint64_t value_of(const std::vector<int64_t>& bits, size_t from, size_t to) {
  uint64_t v = 0;
  for (size_t i = to; i-- > from;) v = 2 * v + bits[i];
  return v;
}

// The scored prefix of a terminated output (bits, then 2): the bits.
std::vector<int64_t> until_terminator(const Example& e) {
  auto end = std::find(e.output.begin(), e.output.end(), 2);
  return std::vector<int64_t>(e.output.begin(), end);
}

}  // namespace

CATCH_TEST_CASE("every task: length laws, alphabets, scoring masks, determinism", "[tasks]") {
  for (const auto& entry : task_registry()) {
    if (entry.info.name == "text" || entry.info.name == "token_ids") continue;  // test_text.cpp, test_token_ids.cpp
    auto task = entry.factory(OptionValues::defaults(entry.info.options), "");
    const auto& t = seq2seq(task);
    int64_t checked = 0;  // lengths the task takes (check_length), of 1-14 and 20
    for (int64_t length : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 20}) {
      CATCH_INFO(entry.info.name << " length " << length);
      try {
        t.check_length(length, true);
      } catch (const std::invalid_argument&) {
        continue;
      }
      ++checked;
      Rng a(length), b(length);
      for (int i = 0; i < 20; ++i) {
        Example e = t.generate(length, a), again = t.generate(length, b);
        CATCH_CHECK(e.input == again.input);
        CATCH_CHECK(e.output == again.output);
        CATCH_CHECK(static_cast<int64_t>(e.input.size()) == t.input_length(length));
        CATCH_CHECK(static_cast<int64_t>(e.output.size()) == t.output_length(length));
        CATCH_CHECK((e.scored.empty() || e.scored.size() == e.output.size()));
        for (int64_t s : e.input) CATCH_CHECK((s >= 0 && s < t.input_symbols()));
        for (int64_t s : e.output) CATCH_CHECK((s >= 0 && s < t.num_classes()));
        if (t.outputs_are_input_symbols())
          for (int64_t s : e.output) CATCH_CHECK(s < t.input_symbols());
      }
      for (const auto& format : entry.info.formats) {
        CATCH_INFO("format " << format);
        auto formatted = entry.factory(OptionValues::defaults(entry.info.options), format);
        Rng c(99);
        Batch batch = formatted->sample(4, length, c);
        CATCH_CHECK(batch.tokens.size(1) == formatted->sequence_length(length));
        CATCH_CHECK(batch.scored.any().item<bool>());
        CATCH_CHECK(batch.tokens.min().item<int64_t>() >= 1);
        CATCH_CHECK(batch.tokens.max().item<int64_t>() < formatted->vocab_size());
        CATCH_CHECK(batch.targets.max().item<int64_t>() < formatted->num_classes());
      }
    }
    CATCH_INFO(entry.info.name);
    CATCH_CHECK(checked > 0);
  }
}

CATCH_TEST_CASE("regular tasks: parity, even pairs, cycle navigation, modular arithmetic", "[tasks]") {
  Rng rng(1);
  auto parity = test::default_task("parity_check");
  auto pairs = test::default_task("even_pairs");
  auto cycle = test::default_task("cycle_navigation");
  auto arithmetic = test::default_task("modular_arithmetic");
  for (int i = 0; i < 200; ++i) {
    Example p = seq2seq(parity).generate(9, rng);
    CATCH_CHECK(p.output[0] == std::count(p.input.begin(), p.input.end(), 1) % 2);
    Example e = seq2seq(pairs).generate(9, rng);
    CATCH_CHECK(e.output[0] == (e.input.front() == e.input.back() ? 0 : 1));  // even pairs <=> same ends
    Example c = seq2seq(cycle).generate(9, rng);
    int64_t position = 0;
    for (int64_t s : c.input) position = (position + (s == 2 ? 1 : s == 0 ? 4 : 0)) % 5;
    CATCH_CHECK(c.output[0] == position);
  }
  // modular arithmetic, m = 5: digits 0-4, + 5, - 6, * 7; precedence of *
  const auto& m = seq2seq(arithmetic);
  CATCH_CHECK(m.input_length(8) == 7);
  for (int i = 0; i < 300; ++i) {
    Example x = m.generate(7, rng);  // d op d op d op d
    std::vector<int64_t> d = {x.input[0], x.input[2], x.input[4], x.input[6]};
    std::vector<int64_t> op = {x.input[1], x.input[3], x.input[5]};
    // evaluate the 27 operator patterns through an independent two-pass evaluation
    std::vector<int64_t> values = {d[0]};
    std::vector<int64_t> ops;
    for (int k = 0; k < 3; ++k) {
      if (op[k] == 7) values.back() *= d[k + 1];
      else { ops.push_back(op[k]); values.push_back(d[k + 1]); }
    }
    int64_t total = values[0];
    for (size_t k = 0; k < ops.size(); ++k) total += ops[k] == 5 ? values[k + 1] : -values[k + 1];
    CATCH_CHECK(x.output[0] == ((total % 5) + 5) % 5);
  }
}

CATCH_TEST_CASE("modular_arithmetic_brackets and solve_equation evaluate their expressions", "[tasks]") {
  Rng rng(2);
  auto brackets = test::default_task("modular_arithmetic_brackets");
  // evaluate token lists with a small recursive-descent parser: E = d | -d | ( E ) | ( -d ) | ( E op E )
  struct Parser {
    const std::vector<int64_t>& s;
    size_t i = 0;
    int64_t m;
    int64_t expr() {
      if (s[i] < m) return s[i++];
      if (s[i] == m + 1) { ++i; return (m - s[i++]) % m; }  // -d
      ++i;  // (
      int64_t left = expr();
      if (s[i] == m + 4) { ++i; return left; }  // (E)
      const int64_t op = s[i++];
      const int64_t right = expr();
      ++i;  // )
      const int64_t v = op == m ? left + right : op == m + 1 ? left - right : left * right;
      return ((v % m) + m) % m;
    }
  };
  for (int64_t length : {1, 2, 3, 4, 5, 9, 17, 30}) {
    for (int i = 0; i < 30; ++i) {
      Example e = seq2seq(brackets).generate(length, rng);
      Parser p{e.input, 0, 5};
      CATCH_CHECK(p.expr() == e.output[0]);
      CATCH_CHECK(p.i == e.input.size());  // the whole input is one expression
    }
  }
  auto equation = test::default_task("solve_equation");  // ids: + 5, - 6, ( 7, ) 8, x 9, = 10
  for (int i = 0; i < 100; ++i) {
    Example e = seq2seq(equation).generate(15, rng);
    CATCH_REQUIRE(std::count(e.input.begin(), e.input.end(), 9) == 1);
    CATCH_CHECK(e.input[13] == 10);
    // substitute the answer for x and map to the brackets alphabet (+ 5, - 6, ( 8, ) 9): it holds
    std::vector<int64_t> lhs;
    for (int64_t k = 0; k < 13; ++k) {
      const int64_t s = e.input[k];
      lhs.push_back(s == 9 ? e.output[0] : s == 7 ? 8 : s == 8 ? 9 : s);
    }
    Parser p{lhs, 0, 5};
    CATCH_CHECK(p.expr() == e.input[14]);
  }
}

CATCH_TEST_CASE("context-sensitive tasks: odds first, bucket sort, missing duplicate, stack", "[tasks]") {
  Rng rng(3);
  Example o = seq2seq(test::default_task("odds_first")).generate(8, rng);
  for (int k = 0; k < 4; ++k) {
    CATCH_CHECK(o.output[k] == o.input[2 * k + 1]);
    CATCH_CHECK(o.output[4 + k] == o.input[2 * k]);
  }
  Example s = seq2seq(test::default_task("bucket_sort")).generate(30, rng);
  CATCH_CHECK(std::is_sorted(s.output.begin(), s.output.end()));
  CATCH_CHECK(std::is_permutation(s.output.begin(), s.output.end(), s.input.begin()));
  auto missing = test::default_task("missing_duplicate_string");
  for (int64_t length : {6, 7}) {
    Example m = seq2seq(missing).generate(length, rng);
    auto hole = std::find(m.input.begin(), m.input.end(), 2) - m.input.begin();
    const int64_t half = length / 2, twin = hole < half ? hole + half : hole - half;
    CATCH_CHECK(m.output[0] == m.input[twin]);
    CATCH_CHECK((length % 2 == 0 || m.input.back() == 3));
  }
  // the stack: replay the actions
  auto stack = test::default_task("stack_manipulation");
  for (int i = 0; i < 100; ++i) {
    Example e = seq2seq(stack).generate(10, rng);
    std::vector<int64_t> replay;
    for (int64_t x : e.input) {
      if (x <= 1) replay.push_back(x);
      else if (x == 2) { if (!replay.empty()) replay.pop_back(); }
      else replay.push_back(x - 3);
    }
    std::vector<int64_t> top_first(replay.rbegin(), replay.rend());
    CATCH_CHECK(until_terminator(e) == top_first);
    const size_t scored = std::count(e.scored.begin(), e.scored.end(), true);
    CATCH_CHECK(scored == top_first.size() + 1);  // the stack and its terminator, not the padding
  }
}

CATCH_TEST_CASE("binary arithmetic: sums, products and square roots are right", "[tasks]") {
  Rng rng(4);
  auto addition = test::default_task("binary_addition");
  auto product = test::default_task("binary_multiplication");
  auto root = test::default_task("compute_sqrt");
  for (int64_t length : {3, 5, 12, 20}) {
    for (int i = 0; i < 50; ++i) {
      Example a = seq2seq(addition).generate(length, rng);
      const size_t plus = std::find(a.input.begin(), a.input.end(), 2) - a.input.begin();
      const uint64_t n = value_of(a.input, 0, plus), m = value_of(a.input, plus + 1, a.input.size());
      CATCH_CHECK(n > 0);
      CATCH_CHECK(m > 0);
      auto sum = until_terminator(a);
      CATCH_CHECK(value_of(sum, 0, sum.size()) == n + m);
      CATCH_CHECK((sum.size() == 1 || sum.back() == 1));  // no high zeros
      Example p = seq2seq(product).generate(length, rng);
      const size_t times = std::find(p.input.begin(), p.input.end(), 2) - p.input.begin();
      auto prod = until_terminator(p);
      CATCH_CHECK(value_of(prod, 0, prod.size()) == value_of(p.input, 0, times) * value_of(p.input, times + 1, p.input.size()));
      Example r = seq2seq(root).generate(length, rng);  // big-endian
      std::vector<int64_t> n_le(r.input.rbegin(), r.input.rend()), root_le(r.output.rbegin(), r.output.rend());
      const uint64_t x = value_of(n_le, 0, n_le.size()), s = value_of(root_le, 0, root_le.size());
      CATCH_CHECK(s * s <= x);
      CATCH_CHECK((s + 1) * (s + 1) > x);
    }
  }
  // the degenerate short inputs of the reference
  Example one = seq2seq(product).generate(1, rng);
  CATCH_CHECK(one.output == std::vector<int64_t>{2});
  Example two = seq2seq(product).generate(2, rng);
  CATCH_CHECK(two.output == std::vector<int64_t>{0, 2});
  // long operands need no machine words: 200-bit sums are still checked bit by bit
  Example big = seq2seq(addition).generate(200, rng);
  CATCH_CHECK(big.output.size() == 201u);
}
