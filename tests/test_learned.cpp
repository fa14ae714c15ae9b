#include "tests/catch.h"

#include "core/encodings/learned.h"
#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "tests/support.h"

using namespace pelab;

namespace {
LearnedPositionEncodingImpl make_learned(int64_t max_positions) {
  auto options = OptionValues::defaults(LearnedPositionEncodingImpl::options());
  options.set("max_positions", max_positions);
  return LearnedPositionEncodingImpl(EncodingContext{16, 2, 2, false}, options);
}
}  // namespace

CATCH_TEST_CASE("learned owns exactly one (max_positions, d_model) table", "[learned]") {
  auto pe = make_learned(10);
  auto params = pe.named_parameters();
  CATCH_REQUIRE(params.size() == 1u);
  CATCH_CHECK(params.begin()->key() == "table");
  CATCH_CHECK(params.begin()->value().sizes() == torch::IntArrayRef({10, 16}));
  // BERT initialisation: N(0, 0.02^2)
  auto big = make_learned(4096);
  CATCH_CHECK(big.named_parameters()[0].value().std().item<double>() == Approx(0.02).epsilon(0.05));
}

CATCH_TEST_CASE("learned inject: per_layer gives every block a table, added before it and counted", "[learned]") {
  auto options = OptionValues::defaults(LearnedPositionEncodingImpl::options());
  options.set("max_positions", int64_t(10));
  options.set("inject", std::string("per_layer"));
  LearnedPositionEncodingImpl pe(EncodingContext{16, 2, 3, false}, options);  // 3 blocks
  auto params = pe.named_parameters();
  CATCH_REQUIRE(params.size() == 3u);
  CATCH_CHECK(pe.position_tables().size() == 3u);
  auto positions = torch::tensor({3, 0, 9}, torch::kInt64).unsqueeze(0);
  const Positions p{positions, positions};
  auto x = torch::zeros({1, 3, 16});
  CATCH_CHECK(torch::equal(pe.embed(x, p, kInputLayer), x));  // nothing at the token embeddings
  for (int64_t layer = 0; layer < 3; ++layer)
    CATCH_CHECK(torch::equal(pe.embed(x, p, layer)[0][0], params["table_" + std::to_string(layer)][3]));
  // the run file's parameter counts: three tables instead of one
  auto task = test::default_task("reverse_string");
  auto shared = test::tiny_config({"encoding.name=learned", "encoding.inject=every_layer"});
  auto own = test::tiny_config({"encoding.name=learned", "encoding.inject=per_layer"});
  const int64_t table = 512 * shared.model.d_model;
  CATCH_CHECK(count_parameters(*build_model(shared, *task)).at("position_encoding") == table);
  CATCH_CHECK(count_parameters(*build_model(own, *task)).at("position_encoding") == shared.model.num_layers * table);
  // one block: its table is table_0, and the trainer records that table's rows (it looked
  // for "table" and failed before training)
  LearnedPositionEncodingImpl single(EncodingContext{16, 2, 1, false}, options);
  CATCH_REQUIRE(single.position_tables().size() == 1u);
  CATCH_CHECK(single.position_tables()[0].parameter == "table_0");
  auto one_block = test::tiny_config({"encoding.name=learned", "encoding.inject=per_layer", "model.num_layers=1",
                                      "train.steps=2"});
  Encoder model = build_model(one_block, *task);
  Trainer trainer(one_block, model, *task, torch::kCPU);
  std::ostringstream log;
  trainer.train(log, false);
  CATCH_REQUIRE(trainer.trained_rows().size() == 1u);
  CATCH_CHECK(trainer.trained_rows()[0].parameter == "position_encoding.table_0");
}

CATCH_TEST_CASE("learned returns the table rows of the positions", "[learned]") {
  auto pe = make_learned(10);
  auto table = pe.named_parameters()[0].value();
  auto positions = torch::tensor({3, 0, 9}, torch::kInt64).unsqueeze(0);
  auto v = pe.position_vectors(positions, kInputLayer);
  CATCH_CHECK(torch::equal(v[0][0], table[3]));
  CATCH_CHECK(torch::equal(v[0][2], table[9]));
}

CATCH_TEST_CASE("learned: a sequence longer than the table is a clear error", "[learned]") {
  auto pe = make_learned(8);
  CATCH_CHECK_NOTHROW(pe.check_positions(contiguous_positions(2, 8)));
  CATCH_CHECK_THROWS_WITH(
      pe.check_positions(contiguous_positions(2, 9)),
      test::ContainsText("learned: position 8 does not fit the table of max_positions = 8 rows") &&
          test::ContainsText("raise encoding.max_positions to at least 9"));

  // through the whole model too, not an index crash
  auto config = test::tiny_config({"encoding.name=learned", "encoding.max_positions=10"});
  auto task = test::default_task("reverse_string");
  torch::manual_seed(0);
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  Rng rng(1);
  Batch b = task->sample(2, 6, rng);  // 12 tokens
  CATCH_CHECK_THROWS_WITH(model->forward(b.tokens, b.padding, contiguous_positions(2, 12)),
                          test::ContainsText("position 11 does not fit"));
}

CATCH_TEST_CASE("a run whose test lengths do not fit the table fails before training, saying why", "[learned]") {
  auto config = test::tiny_config({"encoding.name=learned", "encoding.max_positions=12", "eval.lengths=[3, 8]"});
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *task, *model),
                          Catch::Matchers::StartsWith("length 8 (16 tokens) cannot be encoded: learned: position 15 "
                                                      "does not fit the table of max_positions = 12 rows"));
  config.eval.lengths = {3, 6};
  CATCH_CHECK_NOTHROW(check_lengths_fit(config, *task, *model));
  // a continuous sampler's real positions cannot index the table: refused, naming both
  for (const char* sampler : {"cape", "random_float"}) {
    config.positions.sampler = sampler;
    CATCH_CHECK_THROWS_WITH(check_lengths_fit(config, *task, *model),
                            test::ContainsText(std::string("cannot be encoded with positions.sampler ") + sampler +
                                               ": learned: real-valued positions cannot index its tables"));
  }
  auto sinusoidal = test::tiny_config({"encoding.name=sinusoidal", "positions.sampler=cape"});
  CATCH_CHECK_NOTHROW(check_lengths_fit(sinusoidal, *task, *build_model(sinusoidal, *task)));
}
