#include "tests/catch.h"

#include <filesystem>
#include <fstream>

#include "data/tasks/token_ids.h"
#include "tests/support.h"

using namespace pelab;

namespace {

TokenIdsTask make_token_ids(const std::vector<std::pair<std::string, OptionValue>>& set) {
  auto options = OptionValues::defaults(TokenIdsTask::options());
  for (const auto& [name, value] : set) options.set(name, value);
  return TokenIdsTask(options);
}

std::string write_ids(const std::string& name, const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

CATCH_TEST_CASE("token_ids: uniform ids between [CLS] and [SEP], each its own target", "[tasks][token_ids]") {
  const auto task = make_token_ids({{"vocab_size", int64_t(50)}, {"first_id", int64_t(10)}, {"last_id", int64_t(12)},
                                    {"cls_id", int64_t(3)}, {"sep_id", int64_t(4)}});
  CATCH_CHECK(task.sequence_length(6) == 8);
  CATCH_CHECK(task.num_classes() == 50);
  Rng rng(1);
  const Batch b = task.sample(64, 6, rng);
  CATCH_REQUIRE(b.tokens.sizes() == torch::IntArrayRef({64, 8}));
  CATCH_CHECK((b.tokens.select(1, 0) == 3).all().item<bool>());
  CATCH_CHECK((b.tokens.select(1, 7) == 4).all().item<bool>());
  const auto body = b.tokens.narrow(1, 1, 6);
  CATCH_CHECK((body >= 10).logical_and(body <= 12).all().item<bool>());
  for (int64_t id : {10, 11, 12}) CATCH_CHECK((body == id).any().item<bool>());  // the whole range is drawn
  CATCH_CHECK(torch::equal(b.targets, b.tokens));
  CATCH_CHECK(b.scored.all().item<bool>());
  CATCH_CHECK(!b.padding.any().item<bool>());
  Rng again(1);
  CATCH_CHECK(torch::equal(task.sample(64, 6, again).tokens, b.tokens));
}

CATCH_TEST_CASE("token_ids: a file of ids as windows, in order for evaluation", "[tasks][token_ids]") {
  const auto path = write_ids("pelab-token-ids.txt", "5 6 7\n8 9\n10 11 12 13\n");
  const auto task = make_token_ids({{"vocab_size", int64_t(20)}, {"file", path}});
  CATCH_CHECK(task.file_ids().size() == 9);
  CATCH_CHECK(task.evaluation_size(4, 100) == 2);  // 9 ids: two windows of 4
  Rng rng(0);
  const Batch b = task.evaluation_batch(4, 0, 2, rng);
  CATCH_CHECK(torch::equal(b.tokens, torch::tensor({5, 6, 7, 8, 9, 10, 11, 12}, torch::kInt64).reshape({2, 4})));
  const Batch second = task.evaluation_batch(4, 1, 1, rng);
  CATCH_CHECK(torch::equal(second.tokens, b.tokens.narrow(0, 1, 1)));
  // training windows start anywhere, each a run of consecutive ids of the file
  const Batch training = task.sample(32, 4, rng);
  CATCH_CHECK((training.tokens.narrow(1, 1, 3) - training.tokens.narrow(1, 0, 3) == 1).all().item<bool>());
  CATCH_CHECK_THROWS_WITH(task.check_length(10, false), test::ContainsText("longer than the 9 ids"));
}

CATCH_TEST_CASE("token_ids: ids outside the vocabulary are refused, naming the option or file", "[tasks][token_ids]") {
  CATCH_CHECK_THROWS_WITH(make_token_ids({{"vocab_size", int64_t(20)}, {"cls_id", int64_t(20)}}),
                          test::ContainsText("task.options.cls_id = 20 is not an id of the vocabulary [0, 20)"));
  CATCH_CHECK_THROWS_WITH(make_token_ids({{"vocab_size", int64_t(20)}, {"first_id", int64_t(9)}, {"last_id", int64_t(3)}}),
                          test::ContainsText("first_id = 9 is above last_id = 3"));
  const auto big = write_ids("pelab-token-ids-big.txt", "1 2 25\n");
  CATCH_CHECK_THROWS_WITH(make_token_ids({{"vocab_size", int64_t(20)}, {"file", big}}),
                          test::ContainsText("holds id 25, outside the vocabulary [0, 20)"));
  const auto words = write_ids("pelab-token-ids-words.txt", "1 2 three\n");
  CATCH_CHECK_THROWS_WITH(make_token_ids({{"vocab_size", int64_t(20)}, {"file", words}}),
                          test::ContainsText("holds something other than integer ids"));
}
