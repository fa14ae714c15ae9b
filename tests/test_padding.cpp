// pelab padding's measurement (core/analysis/padding.h): with the attention mask the padding
// row cannot reach real tokens; without it, it does in a bidirectional model and cannot in a
// causal one (padding comes after every real token).
#include "core/analysis/padding.h"

#include "tests/catch.h"
#include "tests/support.h"

using namespace pelab;

namespace {

std::vector<PaddingEffect> effects_of(const std::vector<std::string>& overrides) {
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config(overrides);
  torch::manual_seed(0);
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  model->eval();
  Rng rng(3);
  Batch batch = task->sample(4, 6, rng);
  const auto positions = contiguous_positions(batch.tokens.size(0), batch.tokens.size(1));
  const auto before = model->named_parameters()["token_embedding.weight"].clone();
  auto effects = padding_effects(model, batch, positions, 5);
  CATCH_CHECK(torch::equal(model->named_parameters()["token_embedding.weight"], before));  // row restored
  return effects;
}

}  // namespace

CATCH_TEST_CASE("the padding row reaches real tokens only without the mask, and only bidirectionally",
                "[padding]") {
  for (const std::string scheme : {"learned", "alibi", "t5_bias"}) {
    CATCH_SECTION(scheme) {
      const auto bidirectional = effects_of({"encoding.name=" + scheme});
      CATCH_REQUIRE(bidirectional.size() == 6u);  // zero, random, huge x mask on, off
      for (const auto& e : bidirectional) {
        CATCH_INFO(e.row << (e.masked ? " masked" : " unmasked"));
        if (e.masked) CATCH_CHECK(e.max_logit_change < 1e-5);
        else CATCH_CHECK(e.max_logit_change > 1e-3);
      }
      for (const auto& e : effects_of({"encoding.name=" + scheme, "model.causal=true"})) {
        CATCH_INFO(e.row << (e.masked ? " masked" : " unmasked"));
        CATCH_CHECK(e.max_logit_change < 1e-5);
        CATCH_CHECK(e.changed_predictions == 0.0);
      }
    }
  }
}
