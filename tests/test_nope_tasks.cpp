// The NoPE-paper tasks (Kazemnejad et al. 2023): copy, reverse, sort, addition, each checked
// by an independent computation on generated examples.
#include "tests/catch.h"

#include <algorithm>
#include <map>

#include "data/tasks/addition.h"
#include "data/tasks/symbol_strings.h"
#include "tests/support.h"

using namespace pelab;

namespace {

template <typename T>
T make(std::map<std::string, OptionValue> settings = {}) {
  auto options = OptionValues::defaults(T::options());
  for (const auto& [name, value] : settings) options.set(name, value);
  return T(options);
}

// Digits (most significant first) -> value.
uint64_t value_of(const std::vector<int64_t>& digits, int64_t base) {
  uint64_t v = 0;
  for (int64_t d : digits) v = v * base + d;
  return v;
}

}  // namespace

CATCH_TEST_CASE("copy, reverse and sort rearrange uniform symbols of the configured vocabulary", "[tasks][nope]") {
  auto copy = make<CopyTask>({{"vocab_size", int64_t(7)}});
  auto reverse = make<ReverseTask>();
  auto sort = make<SortTask>({{"vocab_size", int64_t(5)}});
  CATCH_CHECK(copy.input_symbols() == 7);
  CATCH_CHECK(reverse.input_symbols() == 26);  // default: the letters
  Rng rng(8);
  std::vector<int64_t> histogram(7, 0);
  for (int64_t length : {1, 5, 40}) {
    Example c = copy.generate(length, rng), r = reverse.generate(length, rng), s = sort.generate(length, rng);
    CATCH_CHECK(c.output == c.input);
    for (int64_t i = 0; i < length; ++i) CATCH_CHECK(r.output[i] == r.input[length - 1 - i]);
    // sorted, and the same multiset: every symbol's count is kept
    CATCH_CHECK(std::is_sorted(s.output.begin(), s.output.end()));
    for (int64_t symbol = 0; symbol < 5; ++symbol)
      CATCH_CHECK(std::count(s.output.begin(), s.output.end(), symbol) ==
                  std::count(s.input.begin(), s.input.end(), symbol));
    for (int64_t x : c.input) ++histogram.at(x);
    CATCH_CHECK(copy.sequence_length(length) == 2 * length);
  }
  for (int64_t n : histogram) CATCH_CHECK(n > 0);
  for (int i = 0; i < 100; ++i)
    for (int64_t x : sort.generate(30, rng).input) CATCH_CHECK((x >= 0 && x < 5));
}

CATCH_TEST_CASE("addition: the output digits are the sum of the two operands", "[tasks][nope]") {
  for (int64_t base : {10, 2, 7}) {
    auto task = make<AdditionTask>({{"base", base}});
    CATCH_CHECK(task.input_symbols() == base + 1);
    CATCH_CHECK(task.num_classes() == base);
    Rng rng(base);
    for (int64_t n : {1, 2, 5, 9}) {
      CATCH_INFO("base " << base << ", " << n << " digits");
      CATCH_CHECK(task.sequence_length(n) == (2 * n + 1) + (n + 1));
      for (int i = 0; i < 50; ++i) {
        Example e = task.generate(n, rng);
        CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == 2 * n + 1);
        CATCH_REQUIRE(static_cast<int64_t>(e.output.size()) == n + 1);
        CATCH_CHECK(e.input[n] == task.plus_symbol());
        std::vector<int64_t> a(e.input.begin(), e.input.begin() + n), b(e.input.begin() + n + 1, e.input.end());
        for (int64_t d : a) CATCH_CHECK((d >= 0 && d < base));
        if (n > 1) CATCH_CHECK((a[0] != 0 && b[0] != 0));  // exactly n digits
        CATCH_CHECK(value_of(a, base) + value_of(b, base) == value_of(e.output, base));
      }
    }
  }
}

CATCH_TEST_CASE("addition with reverse_digits writes every number least significant digit first", "[tasks][nope]") {
  auto plain = make<AdditionTask>();
  auto reversed = make<AdditionTask>({{"reverse_digits", true}});
  Rng a(3), b(3);
  for (int i = 0; i < 20; ++i) {
    Example p = plain.generate(6, a), r = reversed.generate(6, b);  // the same operands
    std::vector<int64_t> back(r.output.rbegin(), r.output.rend());
    CATCH_CHECK(back == p.output);
    CATCH_CHECK(std::equal(p.input.begin(), p.input.begin() + 6, r.input.rbegin() + 7));
  }
}

CATCH_TEST_CASE("addition of 1-digit numbers: every pair of digits occurs, and carries are 45%", "[tasks][nope]") {
  auto task = make<AdditionTask>();
  Rng rng(12);
  int carries = 0;
  std::vector<int> seen(100, 0);
  for (int i = 0; i < 10000; ++i) {
    Example e = task.generate(1, rng);
    ++seen[e.input[0] * 10 + e.input[2]];
    carries += e.output[0];
  }
  for (int n : seen) CATCH_CHECK(n > 50);
  CATCH_CHECK(carries == Approx(4500).margin(250));
}
