#include "tests/catch.h"

#include "data/duplicate_string.h"
#include "data/reverse_string.h"
#include "tests/support.h"

using namespace pelab;

namespace {
OptionValues alphabet(int64_t size) {
  auto o = OptionValues::defaults(ReverseStringTask::options());
  o.set("alphabet_size", size);
  return o;
}
}  // namespace

CATCH_TEST_CASE("reverse_string examples are reversed inputs", "[tasks]") {
  ReverseStringTask task(alphabet(2));
  Rng rng(42);
  for (int64_t length : {1, 2, 7, 30}) {
    Example e = task.generate(length, rng);
    CATCH_REQUIRE(static_cast<int64_t>(e.input.size()) == length);
    CATCH_REQUIRE(e.output.size() == e.input.size());
    for (int64_t i = 0; i < length; ++i) {
      CATCH_CHECK(e.output[i] == e.input[length - 1 - i]);
      CATCH_CHECK((e.input[i] == 0 || e.input[i] == 1));
    }
  }
}

CATCH_TEST_CASE("duplicate_string examples are the input twice", "[tasks]") {
  DuplicateStringTask task(alphabet(3));
  Rng rng(7);
  Example e = task.generate(9, rng);
  CATCH_REQUIRE(e.output.size() == 18u);
  for (size_t i = 0; i < 9; ++i) {
    CATCH_CHECK(e.output[i] == e.input[i]);
    CATCH_CHECK(e.output[9 + i] == e.input[i]);
    CATCH_CHECK((e.input[i] >= 0 && e.input[i] < 3));
  }
  CATCH_CHECK(task.sequence_length(9) == 27);
}

CATCH_TEST_CASE("symbols are uniform over the alphabet", "[tasks]") {
  ReverseStringTask task(alphabet(4));
  Rng rng(3);
  std::vector<int64_t> counts(4, 0);
  for (int i = 0; i < 200; ++i)
    for (int64_t s : task.generate(50, rng).input) ++counts[s];
  for (int64_t c : counts) CATCH_CHECK(c == Approx(2500).margin(200));  // 10000 draws
}

CATCH_TEST_CASE("encoder format: input tokens, then one placeholder per output token (Ruoss et al.)", "[tasks]") {
  ReverseStringTask task(alphabet(2));
  Rng rng(5);
  Batch b = task.sample(3, 4, rng);
  CATCH_CHECK(b.tokens.sizes() == torch::IntArrayRef({3, 8}));
  CATCH_CHECK(b.length == 4);
  CATCH_CHECK_FALSE(b.padding.any().item<bool>());
  for (int64_t row = 0; row < 3; ++row) {
    for (int64_t t = 0; t < 4; ++t) {
      const int64_t token = b.tokens[row][t].item<int64_t>();
      CATCH_CHECK((token == Seq2SeqTask::kFirstSymbolToken || token == Seq2SeqTask::kFirstSymbolToken + 1));
      CATCH_CHECK_FALSE(b.scored[row][t].item<bool>());
      CATCH_CHECK(b.segments[row][t].item<int64_t>() == 0);
      // the target at placeholder 4 + t is input symbol 3 - t
      CATCH_CHECK(b.targets[row][4 + t].item<int64_t>() ==
                  b.tokens[row][3 - t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken);
      CATCH_CHECK(b.tokens[row][4 + t].item<int64_t>() == Seq2SeqTask::kPlaceholderToken);
      CATCH_CHECK(b.scored[row][4 + t].item<bool>());
      CATCH_CHECK(b.segments[row][4 + t].item<int64_t>() == 1);
    }
  }
  CATCH_CHECK(task.vocab_size() == 4);  // pad, placeholder, 2 symbols
  CATCH_CHECK(task.num_classes() == 2);
}

CATCH_TEST_CASE("batches are reproducible from the seed", "[tasks]") {
  ReverseStringTask task(alphabet(2));
  Rng a(99), b(99), c(100);
  auto x = task.sample(16, 10, a), y = task.sample(16, 10, b), z = task.sample(16, 10, c);
  CATCH_CHECK(torch::equal(x.tokens, y.tokens));
  CATCH_CHECK_FALSE(torch::equal(x.tokens, z.tokens));
}

CATCH_TEST_CASE("padding a batch appends unscored padding", "[tasks]") {
  ReverseStringTask task(alphabet(2));
  Rng rng(1);
  Batch b = task.sample(2, 3, rng).padded(4);
  CATCH_CHECK(b.tokens.size(1) == 10);
  CATCH_CHECK(b.padding.narrow(1, 6, 4).all().item<bool>());
  CATCH_CHECK_FALSE(b.padding.narrow(1, 0, 6).any().item<bool>());
  CATCH_CHECK(b.tokens.narrow(1, 6, 4).eq(0).all().item<bool>());
  CATCH_CHECK_FALSE(b.scored.narrow(1, 6, 4).any().item<bool>());
}
