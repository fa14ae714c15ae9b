// The text task on real English text (Debian's fortunes, installed by scripts/setup-deps.sh):
// the byte vocabulary, the held-out split, the evaluation windows, BERT masking, and the
// perplexity of an untrained model.
#include "tests/catch.h"

#include <cmath>
#include <fstream>
#include <map>

#include "core/run/run.h"
#include "core/train/trainer.h"
#include "data/text.h"
#include "tests/support.h"

using namespace pelab;

namespace {

TextTask text_task(const std::string& format, std::map<std::string, OptionValue> settings = {}) {
  auto options = OptionValues::defaults(TextTask::options());
  for (const auto& [name, value] : settings) options.set(name, value);
  TextTask task(options);
  task.set_format(parse_format(format));
  return task;
}

// The bytes a row of tokens stands for (2 + b -> b); [MASK] becomes '?'.
std::string bytes_of(const torch::Tensor& row) {
  std::string out;
  for (int64_t t = 0; t < row.size(0); ++t) {
    const int64_t token = row[t].item<int64_t>();
    out += token == TextTask::kMaskToken ? '?' : static_cast<char>(token - TextTask::kFirstByteToken);
  }
  return out;
}

}  // namespace

CATCH_TEST_CASE("text: bytes of the file are the tokens, the next byte the target", "[text]") {
  auto task = text_task("causal_lm");
  CATCH_CHECK(task.vocab_size() == 258);  // padding, [MASK], 256 bytes
  CATCH_CHECK(task.num_classes() == 256);
  CATCH_REQUIRE(task.size() > 200000);    // songs-poems: English verse, ~230 KB
  CATCH_CHECK(task.bytes().find("the") != std::string::npos);
  Rng rng(1);
  Batch b = task.sample(8, 64, rng);
  CATCH_REQUIRE(b.tokens.sizes() == torch::IntArrayRef({8, 64}));
  CATCH_CHECK(b.scored.all().item<bool>());
  for (int64_t row = 0; row < 8; ++row) {
    const std::string window = bytes_of(b.tokens[row]);
    const size_t at = task.bytes().find(window);
    CATCH_REQUIRE(at != std::string::npos);
    for (int64_t t = 0; t < 64; ++t)
      CATCH_CHECK(b.targets[row][t].item<int64_t>() == static_cast<unsigned char>(task.bytes()[at + t + 1]));
  }
}

CATCH_TEST_CASE("text: no training window reaches the held-out split, evaluation reads only it", "[text]") {
  for (const std::string format : {"causal_lm", "masked_lm"}) {
    CATCH_INFO(format);
    auto task = text_task(format, {{"holdout", 0.2}});
    const int64_t split = task.split_offset();
    CATCH_CHECK(split == task.size() - std::llround(0.2 * task.size()));
    Rng rng(2);
    const int64_t length = 256, extra = format == "causal_lm" ? 1 : 0;
    int64_t latest_end = 0;
    for (int i = 0; i < 20000; ++i) {
      const int64_t start = task.training_window_start(length, rng);
      CATCH_REQUIRE(start >= 0);
      CATCH_REQUIRE(start + length + extra <= split);  // the last target byte included
      latest_end = std::max(latest_end, start + length + extra);
    }
    CATCH_CHECK(latest_end > split - 200);  // and the training split is used to its end
    const int64_t windows = task.evaluation_size(length, 1 << 30);
    CATCH_CHECK(windows > 0);
    Batch eval = task.evaluation_batch(length, 0, windows, rng);
    for (int64_t w : {int64_t(0), int64_t(1), windows - 1}) {
      CATCH_INFO("window " << w);
      const int64_t start = task.evaluation_window_start(length, w);
      const std::string tokens = bytes_of(eval.tokens[w]);
      for (int64_t t = 0; t < length; ++t) {
        const bool predicted = eval.scored[w][t].item<bool>();
        // masked_lm changes predicted positions only
        if (format == "causal_lm" || !predicted) CATCH_CHECK(tokens[t] == task.bytes()[start + t]);
        if (!predicted) continue;
        const int64_t target_offset = start + t + extra;  // causal_lm predicts the next byte
        CATCH_CHECK(target_offset >= split);               // every target is held out
        CATCH_CHECK(target_offset < task.size());
        CATCH_CHECK(eval.targets[w][t].item<int64_t>() == static_cast<unsigned char>(task.bytes()[target_offset]));
      }
    }
  }
}

CATCH_TEST_CASE("text: sliding windows score their last `stride` bytes, non-overlapping ones every byte", "[text]") {
  auto sliding = text_task("causal_lm", {{"window", std::string("sliding")}, {"stride", int64_t(32)}});
  auto plain = text_task("causal_lm", {{"window", std::string("nonoverlapping")}});
  const int64_t split = sliding.split_offset(), held_out = sliding.size() - split;
  auto target_bytes = [](const TextTask& task, int64_t length, int64_t windows) {
    Rng rng(0);
    Batch b = task.evaluation_batch(length, 0, windows, rng);
    std::vector<int64_t> out;
    for (int64_t w = 0; w < windows; ++w)
      for (int64_t t = 0; t < length; ++t)
        if (b.scored[w][t].item<bool>()) out.push_back(b.targets[w][t].item<int64_t>());
    return out;
  };
  // Every length scores the same bytes: the held-out split from its first byte, in order.
  std::vector<int64_t> expected;
  for (int64_t o = split; o < split + 8 * 32; ++o) expected.push_back(static_cast<unsigned char>(sliding.bytes()[o]));
  for (int64_t length : {32, 128, 1024}) {
    CATCH_INFO("length " << length);
    CATCH_CHECK(target_bytes(sliding, length, 8) == expected);
    Rng rng(0);
    Batch s = sliding.evaluation_batch(length, 0, 2, rng);
    CATCH_CHECK(s.scored.sum().item<int64_t>() == 2 * 32);
    CATCH_CHECK(s.scored[0].narrow(0, length - 32, 32).all().item<bool>());
    CATCH_CHECK(sliding.evaluation_size(length, 1 << 30) == held_out / 32);
  }
  CATCH_CHECK(target_bytes(plain, 32, 8) == expected);
  Rng rng(0);
  Batch p = plain.evaluation_batch(128, 0, 2, rng);
  CATCH_CHECK(p.scored.all().item<bool>());
  CATCH_CHECK(plain.evaluation_window_start(128, 1) == split - 1 + 128);
  CATCH_CHECK(plain.evaluation_size(128, 1 << 30) == held_out / 128);
  CATCH_CHECK(plain.evaluation_size(128, 5) == 5);
  CATCH_CHECK_THAT(sliding.evaluation_protocol(), test::ContainsText("sliding windows") &&
                                                      test::ContainsText("scoring its last 32"));
  CATCH_CHECK_THAT(plain.evaluation_protocol(), test::ContainsText("non-overlapping"));
}

CATCH_TEST_CASE("text: BERT masking predicts 15% of positions, 80% [MASK] / 10% random / 10% kept", "[text]") {
  auto task = text_task("masked_lm");
  Rng rng(4);
  int64_t predicted = 0, masked = 0, kept = 0, replaced = 0, windows = 0;
  for (int i = 0; i < 40; ++i) {
    Batch b = task.sample(50, 100, rng);
    for (int64_t row = 0; row < 50; ++row, ++windows) {
      CATCH_REQUIRE(b.scored[row].sum().item<int64_t>() == 15);  // round(0.15 x 100)
      for (int64_t t = 0; t < 100; ++t) {
        const int64_t token = b.tokens[row][t].item<int64_t>();
        if (!b.scored[row][t].item<bool>()) {
          CATCH_REQUIRE(token >= TextTask::kFirstByteToken);  // unpredicted positions are never masked
          continue;
        }
        ++predicted;
        const int64_t original = TextTask::kFirstByteToken + b.targets[row][t].item<int64_t>();
        if (token == TextTask::kMaskToken) ++masked;
        else if (token == original) ++kept;
        else ++replaced;
      }
    }
  }
  CATCH_CHECK(predicted == 15 * windows);
  CATCH_CHECK(double(masked) / predicted == Approx(0.8).margin(0.02));
  // a random byte equals the original 1 time in 256: "kept" is 10% + 10%/256
  CATCH_CHECK(double(kept) / predicted == Approx(0.1 + 0.1 / 256).margin(0.015));
  CATCH_CHECK(double(replaced) / predicted == Approx(0.1 - 0.1 / 256).margin(0.015));
}

CATCH_TEST_CASE("text: an untrained model's perplexity is near the 256 bytes, chance is the unigram", "[text]") {
  for (const std::string format : {"causal_lm", "masked_lm"}) {
    CATCH_INFO(format);
    auto config = test::tiny_config({"task.name=text", "task.format=" + format,
                                     std::string("model.causal=") + (format == "causal_lm" ? "true" : "false"),
                                     "eval.lengths=[64, 512]", "eval.samples=8", "eval.batch_size=8"});
    auto task = make_task(config.task.name, config.task.options, config.task.format);
    Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
    for (const auto& r : trainer.evaluator().evaluate()) {
      CATCH_INFO("length " << r.length);
      CATCH_CHECK(r.samples == 8);
      // near-uniform: small random logits add a little KL divergence above ln 256
      CATCH_CHECK(std::exp(r.loss) > 0.8 * 256);
      CATCH_CHECK(std::exp(r.loss) < 1.35 * 256);
      // English bytes carry ~4.5 bits each without context (8 bits when uniform)
      CATCH_CHECK(r.chance_loss / std::log(2.0) > 3.5);
      CATCH_CHECK(r.chance_loss / std::log(2.0) < 5.5);
      CATCH_CHECK(r.chance_token_accuracy > 0.1);  // the space
    }
  }
}

CATCH_TEST_CASE("text: missing files, non-UTF-8 files and windows that do not fit are clear errors", "[text]") {
  test::TemporaryDirectory dir;
  auto options = OptionValues::defaults(TextTask::options());
  options.set("path", dir.path + "/missing.txt");
  CATCH_CHECK_THROWS_WITH(TextTask(options), test::ContainsText("cannot open '" + dir.path + "/missing.txt'"));
  const std::string latin1 = dir.path + "/latin1.txt";
  std::ofstream(latin1) << "caf\xe9 au lait";
  options.set("path", latin1);
  CATCH_CHECK_THROWS_WITH(TextTask(options), test::ContainsText("is not UTF-8 text (invalid byte 0xe9 at offset 3)"));
  const std::string empty = dir.path + "/empty.txt";
  std::ofstream(empty).flush();
  options.set("path", empty);
  CATCH_CHECK_THROWS_WITH(TextTask(options), test::ContainsText("is empty"));

  auto task = text_task("masked_lm");
  const int64_t held_out = task.size() - task.split_offset();
  CATCH_CHECK_NOTHROW(task.check_length(held_out, false));
  CATCH_CHECK_THROWS_WITH(task.check_length(held_out + 1, false),
                          test::ContainsText("evaluation windows of " + std::to_string(held_out + 1) +
                                                    " bytes do not fit the held-out split"));
  auto lm = text_task("causal_lm");  // sliding: the context before the held-out bytes comes from the training split
  CATCH_CHECK_NOTHROW(lm.check_length(lm.split_offset() + 63, false));
  CATCH_CHECK_THROWS_WITH(lm.check_length(lm.split_offset() + 64, false),
                          test::ContainsText("bytes of context before the held-out split"));
  CATCH_CHECK_THROWS_WITH(lm.check_length(lm.split_offset(), true),
                          test::ContainsText("do not fit the training split"));
  // the run fails before training, not after it
  auto config = test::tiny_config({"task.name=text", "model.causal=true", "eval.lengths=[1000000]"});
  std::ostringstream log;
  CATCH_CHECK_THROWS_WITH(execute_run(config, log, false), test::ContainsText("bytes of context before the held-out"));
  CATCH_CHECK(log.str().find("step") == std::string::npos);
}

CATCH_TEST_CASE("UTF-8 validation", "[text]") {
  CATCH_CHECK(first_invalid_utf8("plain ASCII") == -1);
  CATCH_CHECK(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == -1);  // e-acute, euro, emoji
  CATCH_CHECK(first_invalid_utf8("ab\xc3") == 2);              // truncated
  CATCH_CHECK(first_invalid_utf8("\xc0\xaf") == 0);            // overlong '/'
  CATCH_CHECK(first_invalid_utf8("x\xed\xa0\x80") == 1);       // a UTF-16 surrogate
  CATCH_CHECK(first_invalid_utf8("\xf4\x90\x80\x80") == 0);    // past U+10FFFF
  CATCH_CHECK(first_invalid_utf8("ok\x80") == 2);              // a lone continuation byte
  CATCH_CHECK(first_invalid_utf8("\xff") == 0);
}
