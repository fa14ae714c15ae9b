// The two sequence-to-sequence formats (encoder, causal_lm) and the chance level that every
// evaluation row carries.
#include "tests/catch.h"

#include <cmath>

#include "core/run/run.h"
#include "core/train/metrics.h"
#include "core/train/trainer.h"
#include "data/text.h"
#include "tests/support.h"

using namespace pelab;

namespace {

const Seq2SeqTask& seq2seq(const Task& task) { return dynamic_cast<const Seq2SeqTask&>(task); }

// Greedy decoding with a causal model: output token k is the argmax at position n_in + k
// given the input, the separator and the k tokens decoded before it.
std::vector<int64_t> greedy_decode(Encoder& model, const Seq2SeqTask& task, Example example) {
  const int64_t n_in = example.input.size(), n_out = example.output.size();
  std::vector<int64_t> decoded;
  for (int64_t k = 0; k < n_out; ++k) {
    Example partial = example;
    for (int64_t j = 0; j < n_out; ++j) partial.output[j] = j < k ? decoded[j] : 0;  // later tokens: unseen
    Batch b = task.encode({partial});
    auto logits = model->forward(b.tokens, b.padding, contiguous_positions(1, b.tokens.size(1)), b.segments).logits;
    decoded.push_back(logits[0][n_in + k].argmax().item<int64_t>());
  }
  return decoded;
}

}  // namespace

CATCH_TEST_CASE("causal_lm format: input, separator, output, the token before output k predicts it", "[formats]") {
  auto task = test::default_task("reverse_string", "causal_lm");
  CATCH_REQUIRE(task->format() == TaskFormat::CausalLM);
  Rng rng(5);
  Batch b = task->sample(3, 4, rng);
  CATCH_REQUIRE(b.tokens.sizes() == torch::IntArrayRef({3, 9}));
  CATCH_CHECK(task->sequence_length(4) == 9);
  CATCH_CHECK(task->vocab_size() == 4);  // pad, separator, 2 symbols: the output reuses the input tokens
  for (int64_t row = 0; row < 3; ++row) {
    CATCH_CHECK(b.tokens[row][4].item<int64_t>() == Seq2SeqTask::kSeparatorToken);
    for (int64_t t = 0; t < 4; ++t) {
      const int64_t input_symbol = b.tokens[row][t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken;
      const int64_t expected_output = b.tokens[row][3 - t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken;
      CATCH_CHECK((input_symbol == 0 || input_symbol == 1));
      CATCH_CHECK_FALSE(b.scored[row][t].item<bool>());
      CATCH_CHECK(b.segments[row][t].item<int64_t>() == 0);
      // output token t sits at 5 + t; it is predicted at 4 + t (the separator for t = 0)
      CATCH_CHECK(b.tokens[row][5 + t].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken == expected_output);
      CATCH_CHECK(b.targets[row][4 + t].item<int64_t>() == expected_output);
      CATCH_CHECK(b.scored[row][4 + t].item<bool>());
      CATCH_CHECK(b.segments[row][5 + t].item<int64_t>() == 1);
    }
    CATCH_CHECK_FALSE(b.scored[row][8].item<bool>());  // the last output token predicts nothing
  }
}

CATCH_TEST_CASE("causal_lm format: outputs of another alphabet get their own tokens", "[formats]") {
  auto parity = test::default_task("parity_check", "causal_lm");
  const auto& t = seq2seq(*parity);
  CATCH_CHECK(parity->vocab_size() == 2 + 2 + 2);  // pad/separator, 2 input bits, 2 output classes
  CATCH_CHECK(t.output_token(0) == 4);
  CATCH_CHECK(t.output_token(1) == 5);
  Rng rng(3);
  Batch b = parity->sample(8, 6, rng);
  CATCH_REQUIRE(b.tokens.size(1) == 8);  // 6 bits, separator, 1 output
  for (int64_t row = 0; row < 8; ++row) {
    int64_t ones = 0;
    for (int64_t i = 0; i < 6; ++i) ones += b.tokens[row][i].item<int64_t>() - Seq2SeqTask::kFirstSymbolToken;
    CATCH_CHECK(b.targets[row][6].item<int64_t>() == ones % 2);
    CATCH_CHECK(b.tokens[row][7].item<int64_t>() == t.output_token(ones % 2));
  }
  CATCH_CHECK(b.scored.sum().item<int64_t>() == 8);
}

CATCH_TEST_CASE("task.bos: a BOS token first, counted in positions, scored nowhere", "[formats][bos]") {
  auto plain = test::default_task("reverse_string", "causal_lm");
  auto task = test::default_task("reverse_string", "causal_lm");
  task->set_bos(true);
  const auto& t = seq2seq(*task);
  CATCH_CHECK(task->vocab_size() == 5);  // pad, separator, 2 symbols, BOS
  CATCH_CHECK(t.bos_token() == 4);
  CATCH_CHECK(task->sequence_length(4) == plain->sequence_length(4) + 1);
  Rng a(5), b(5);
  Batch with = task->sample(3, 4, a), without = plain->sample(3, 4, b);
  CATCH_REQUIRE(with.tokens.sizes() == torch::IntArrayRef({3, 10}));
  CATCH_CHECK((with.tokens.select(1, 0) == 4).all().item<bool>());
  CATCH_CHECK_FALSE(with.scored.select(1, 0).any().item<bool>());
  CATCH_CHECK(with.segments.select(1, 0).sum().item<int64_t>() == 0);
  // everything else is the plain layout one position later, the same examples
  for (const auto& [x, y] : {std::pair{with.tokens, without.tokens}, std::pair{with.targets, without.targets},
                             std::pair{with.scored, without.scored}, std::pair{with.segments, without.segments}})
    CATCH_CHECK(torch::equal(x.narrow(1, 1, 9), y));
  CATCH_CHECK_THAT(task->evaluation_protocol(), test::ContainsText("causal_lm: BOS, input, separator, output"));
  // the config: causal_lm of an algorithmic task only, kept by the resolved config
  auto config = test::tiny_config({"model.causal=true", "task.format=causal_lm", "task.bos=true"});
  CATCH_CHECK(config.task.bos);
  CATCH_CHECK(parse_run_config(to_yaml(config), "again.yaml", {}, scheme_catalog(), task_catalog()).task.bos);
  CATCH_CHECK_FALSE(test::tiny_config({"model.causal=true", "task.format=causal_lm"}).task.bos);
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"task.bos=true"}),
                          test::ContainsText("task.bos: a beginning-of-sequence token is offered for the algorithmic "
                                             "tasks' causal_lm format; this task is in format encoder"));
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"task.name=text", "model.causal=true", "task.bos=true"}),
                          test::ContainsText("this task is in format causal_lm"));
}

CATCH_TEST_CASE("a format the config asks for must suit the attention", "[formats][config]") {
  CATCH_CHECK(test::tiny_config().task.format == "encoder");
  CATCH_CHECK(test::tiny_config({"model.causal=true", "task.format=causal_lm"}).task.format == "causal_lm");
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"task.format=causal_lm"}),
                          test::ContainsText("causal_lm (next-token prediction) needs causal attention"));
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"task.format=masked_lm"}),
                          test::ContainsText("expected one of: encoder, causal_lm"));
  CATCH_CHECK_THROWS_WITH(test::tiny_config({"task.name=text", "task.format=masked_lm", "model.causal=true"}),
                          test::ContainsText("masked_lm (BERT-style) needs bidirectional attention"));
  auto text = test::tiny_config({"task.name=text", "model.causal=true"});
  CATCH_CHECK(text.task.format == "causal_lm");
  CATCH_CHECK(text.task.options.get_string("path") == TextTask::kDefaultCorpus);
  // the format survives the YAML round trip of the resolved config
  auto again = parse_run_config(to_yaml(text), "again.yaml", {}, scheme_catalog(), task_catalog());
  CATCH_CHECK(again.task.format == "causal_lm");
  CATCH_CHECK(again.task.options.get_string("path") == TextTask::kDefaultCorpus);
}

CATCH_TEST_CASE("causal_lm: the prediction of output k sees the input and outputs before k only", "[formats]") {
  auto config = test::tiny_config({"model.causal=true", "task.format=causal_lm", "task.name=copy"});
  auto task = make_task(config.task.name, config.task.options, config.task.format);
  Encoder model = build_model(config, *task);
  model->eval();
  torch::NoGradGuard no_grad;
  Rng rng(11);
  Example e = seq2seq(*task).generate(5, rng);
  Example changed = e;
  changed.output[3] = (changed.output[3] + 1) % 26;  // output token 3 sits at position 5 + 1 + 3 = 9
  auto logits_of = [&](const Example& x) {
    Batch b = seq2seq(*task).encode({x});
    return model->forward(b.tokens, b.padding, contiguous_positions(1, 11), b.segments).logits[0];
  };
  auto a = logits_of(e), b = logits_of(changed);
  CATCH_CHECK(torch::allclose(a.narrow(0, 0, 9), b.narrow(0, 0, 9)));  // predictions of outputs 0..4 at 5..8
  CATCH_CHECK_FALSE(torch::allclose(a.narrow(0, 9, 2), b.narrow(0, 9, 2)));
}

CATCH_TEST_CASE("causal_lm: exact match under teacher forcing equals greedy-decoding exact match", "[formats]") {
  auto config = test::tiny_config({"model.causal=true", "task.format=causal_lm", "task.name=sort",
                                   "task.vocab_size=3", "encoding.name=rope"});
  auto task = make_task(config.task.name, config.task.options, config.task.format);
  const auto& t = seq2seq(*task);
  Encoder model = build_model(config, *task);
  model->eval();
  torch::NoGradGuard no_grad;
  Rng rng(21);
  // Half of the examples get the model's own greedy output as their target (teacher forcing
  // must then score them exactly right), the other half a target that differs from it.
  std::vector<Example> examples;
  std::vector<bool> greedy_right;
  for (int i = 0; i < 12; ++i) {
    Example e = t.generate(4, rng);
    e.output = greedy_decode(model, t, e);
    if (i % 2) e.output[i % 4] = (e.output[i % 4] + 1) % 3;
    greedy_right.push_back(greedy_decode(model, t, e) == e.output);
    examples.push_back(e);
  }
  Batch b = t.encode(examples);
  auto logits = model->forward(b.tokens, b.padding, contiguous_positions(12, b.tokens.size(1)), b.segments).logits;
  auto right = ((logits.argmax(-1) == b.targets) | ~b.scored).all(1);
  for (int i = 0; i < 12; ++i) {
    CATCH_INFO("example " << i);
    CATCH_CHECK(right[i].item<bool>() == greedy_right[i]);
    CATCH_CHECK(greedy_right[i] == (i % 2 == 0));
  }
}

CATCH_TEST_CASE("chance level: the most frequent target per position, and its entropy", "[formats][metrics]") {
  // Six rows, two scored positions, an unscored third. Position 0: 0 0 0 0 1 0; position 1:
  // 1 1 1 0 1 1. The even rows' modes (0, 1) predict the odd rows and the odd rows' modes
  // (0, 1) the even rows: 5 of 6 right at each position; rows 3 and 4 miss one target.
  Batch b;
  b.targets = torch::tensor({0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 2, 1, 1, 2, 0, 1, 2}, torch::kInt64).view({6, 3});
  b.scored = torch::tensor({1, 1, 0}, torch::kBool).repeat({6, 1});
  auto rows = [&](int64_t first, int64_t count) {
    Batch part;
    part.targets = b.targets.narrow(0, first, count);
    part.scored = b.scored.narrow(0, first, count);
    return part;
  };
  ChanceLevel per_position(3, true);
  per_position.add(rows(0, 4));  // batches accumulate
  per_position.add(rows(4, 2));
  ChanceScore c = per_position.score();
  CATCH_CHECK(c.token_accuracy == Approx(10.0 / 12.0));
  CATCH_CHECK(c.sequence_accuracy == Approx(4.0 / 6.0));
  // plug-in entropy of (5/6, 1/6) plus Miller-Madow (2 classes - 1) / (2 x 6)
  const double h = -(5.0 / 6 * std::log(5.0 / 6) + 1.0 / 6 * std::log(1.0 / 6)) + 1.0 / 12;
  CATCH_CHECK(c.loss == Approx(h));
  // pooled over positions: one cell of 12 targets, 6 zeros and 6 ones
  ChanceLevel pooled(3, false);
  pooled.add(b);
  CATCH_CHECK(pooled.score().loss == Approx(std::log(2.0) + 1.0 / 24));
  Batch skewed;  // 2 2 2 2 2 1: the even rows' mode 2 gets 2 of 3 odd rows, the odd rows' 3 of 3
  skewed.targets = torch::tensor({2, 2, 2, 2, 2, 1}, torch::kInt64).view({6, 1});
  skewed.scored = torch::ones({6, 1}, torch::kBool);
  ChanceLevel one_cell(3, false);
  one_cell.add(skewed);
  CATCH_CHECK(one_cell.score().token_accuracy == Approx(5.0 / 6.0));
}

CATCH_TEST_CASE("chance level: a position the fitting half never scores takes that half's mode", "[formats][metrics]") {
  // Four rows of targets 2 2; position 1 is scored in the odd rows only (outputs of varying
  // length). The even rows score no position 1, so their prediction there is their mode over
  // all positions (2), not class 0: every scored target is predicted.
  Batch b;
  b.targets = torch::full({4, 2}, 2, torch::kInt64);
  b.scored = torch::tensor({1, 0, 1, 1, 1, 0, 1, 1}, torch::kBool).view({4, 2});
  ChanceLevel chance(3, true);
  chance.add(b);
  CATCH_CHECK(chance.score().token_accuracy == Approx(1.0));
  CATCH_CHECK(chance.score().sequence_accuracy == Approx(1.0));
}

CATCH_TEST_CASE("the chance level of 26 uniform symbols is 1/26, not the in-sample mode's 6.5%", "[formats][metrics]") {
  Rng rng(1);
  auto task = test::default_task("copy");
  ChanceLevel chance(26, true);
  chance.add(task->sample(256, 10, rng));
  CATCH_CHECK(chance.score().token_accuracy == Approx(1.0 / 26).margin(0.006));
  CATCH_CHECK(chance.score().loss == Approx(std::log(26.0)).margin(0.02));
}

CATCH_TEST_CASE("the position-free baseline: the input's most frequent symbol at every output slot, by hand",
                "[formats][metrics]") {
  auto task = test::default_task("reverse_string");
  auto& seq2seq = dynamic_cast<Seq2SeqTask&>(*task);
  for (const auto format : {TaskFormat::Encoder, TaskFormat::CausalLM}) {
    CATCH_CAPTURE(format_name(format));
    seq2seq.set_format(format);
    // 0 1 1 -> 1 1 0: the majority 1, 2 of 3 right; 1 0 0 -> 0 0 1: 0, 2 of 3; 0 0 0 -> 0 0 0: all 3
    const auto batch = seq2seq.encode({{{0, 1, 1}, {1, 1, 0}, {}}, {{1, 0, 0}, {0, 0, 1}, {}}, {{0, 0, 0}, {0, 0, 0}, {}}});
    CATCH_REQUIRE(batch.position_free.defined());
    const auto scored = batch.scored;
    CATCH_CHECK(torch::equal(batch.position_free.masked_select(scored),
                             torch::tensor({1, 1, 1, 0, 0, 0, 0, 0, 0}, torch::kInt64)));
    PositionFreeLevel level;
    level.add(batch);
    CATCH_CHECK(level.score().token_accuracy == Approx(7.0 / 9));
    CATCH_CHECK(level.score().sequence_accuracy == Approx(1.0 / 3));  // only 0 0 0 whole
  }
  // a tie: 0 1 -> 1 0, the smaller symbol 0 at both slots
  const auto tie = seq2seq.encode({{{0, 1}, {1, 0}, {}}});
  CATCH_CHECK(torch::equal(tie.position_free.masked_select(tie.scored), torch::tensor({0, 0}, torch::kInt64)));
  // a task whose outputs do not rearrange the input has none
  Rng rng(3);
  CATCH_CHECK_FALSE(test::default_task("parity_check")->sample(4, 5, rng).position_free.defined());
  PositionFreeLevel none;
  none.add(test::default_task("parity_check")->sample(4, 5, rng));
  CATCH_CHECK(std::isnan(none.score().token_accuracy));
}

CATCH_TEST_CASE("evaluation rows carry the position-free baseline: 57.2% for uniform bits at length 30",
                "[formats][trainer]") {
  // E[max(c, 30 - c)] / 30, c ~ Binomial(30, 1/2): 0.5722; at length 40, 0.5627
  auto config = test::tiny_config({"eval.lengths=[30, 40]", "eval.samples=2000", "eval.batch_size=500"});
  auto task = test::default_task("reverse_string");
  Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
  const auto results = trainer.evaluator().evaluate();
  CATCH_REQUIRE(results.size() == 2u);
  CATCH_CHECK(results[0].position_free_token_accuracy == Approx(0.5722).margin(0.006));
  CATCH_CHECK(results[1].position_free_token_accuracy == Approx(0.5627).margin(0.006));
  CATCH_CHECK(results[0].chance_token_accuracy < results[0].position_free_token_accuracy - 0.04);
  auto parity_config = test::tiny_config({"task.name=parity_check", "eval.lengths=[5]", "eval.samples=100"});
  auto parity = make_task(parity_config.task.name, parity_config.task.options, parity_config.task.format);
  Trainer parity_trainer(parity_config, build_model(parity_config, *parity), *parity, torch::kCPU);
  CATCH_CHECK(std::isnan(parity_trainer.evaluator().evaluate()[0].position_free_token_accuracy));
}

CATCH_TEST_CASE("evaluation rows carry the chance level of their length", "[formats][trainer]") {
  auto config = test::tiny_config({"eval.lengths=[1, 12]", "eval.samples=2000", "eval.batch_size=500"});
  auto task = test::default_task("reverse_string");  // binary alphabet
  Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
  auto results = trainer.evaluator().evaluate();
  CATCH_REQUIRE(results.size() == 2u);
  for (const auto& r : results) {
    CATCH_INFO("length " << r.length);
    CATCH_CHECK(r.chance_token_accuracy == Approx(0.5).margin(0.04));  // the best guess of a fair bit
    CATCH_CHECK(r.chance_loss == Approx(std::log(2.0)).margin(0.02));
  }
  CATCH_CHECK(results[0].chance_sequence_accuracy == Approx(0.5).margin(0.04));
  CATCH_CHECK(results[1].chance_sequence_accuracy < 0.01);  // 2^-12
  // A skewed output: one-digit addition. The carry digit is 0 for 55 of the 100 operand
  // pairs, the last digit uniform: chance per token = (55% + 10%) / 2.
  auto skewed = test::tiny_config({"task.name=addition", "eval.lengths=[1]", "eval.samples=4000",
                                   "eval.batch_size=1000"});
  auto addition = make_task(skewed.task.name, skewed.task.options, skewed.task.format);
  Trainer adder(skewed, build_model(skewed, *addition), *addition, torch::kCPU);
  CATCH_CHECK(adder.evaluator().evaluate()[0].chance_token_accuracy == Approx(0.325).margin(0.02));
}
