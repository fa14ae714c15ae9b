#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include "core/model/batched_matmul.h"
#include "core/model/flops.h"
#include "tests/support.h"

using namespace pelab;

namespace {
EncoderOutput forward(const RunConfig& config, const Batch& b, ForwardRequest request = {true, true}) {
  auto task = test::default_task("reverse_string");
  torch::manual_seed(0);
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  model->eval();
  return model->forward(b.tokens, b.padding, contiguous_positions(b.tokens.size(0), b.tokens.size(1)), b.segments,
                        request);
}
Batch batch() {
  auto task = test::default_task("reverse_string");
  Rng rng(4);
  return task->sample(2, 5, rng);
}
}  // namespace

CATCH_TEST_CASE("pre-LN, post-LN, GELU and ReLU all build and differ", "[encoder]") {
  Batch b = batch();
  auto pre = forward(test::tiny_config({"model.norm=pre"}), b).logits;
  auto post = forward(test::tiny_config({"model.norm=post"}), b).logits;
  auto relu = forward(test::tiny_config({"model.activation=relu"}), b).logits;
  CATCH_CHECK_FALSE(torch::allclose(pre, post));
  CATCH_CHECK_FALSE(torch::allclose(pre, relu));
  // post-LN: every layer output is normalised (zero mean, unit variance per token)
  auto hidden = forward(test::tiny_config({"model.norm=post"}), b).hidden_states.back();
  CATCH_CHECK(hidden.mean(-1).abs().max().item<float>() < 1e-4);
}

CATCH_TEST_CASE("segment embeddings are optional and used when present", "[encoder]") {
  Batch b = batch();
  auto config = test::tiny_config({"model.segment_embeddings=true"});
  auto task = test::default_task("reverse_string");
  torch::manual_seed(0);
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  CATCH_CHECK(model->named_parameters().contains("segment_embedding.weight"));
  auto plain = test::tiny_config();
  Encoder without(plain.model, plain.encoding, task->vocab_size(), task->num_classes());
  CATCH_CHECK_FALSE(without->named_parameters().contains("segment_embedding.weight"));
  auto positions = contiguous_positions(2, 10);
  model->eval();
  auto with_segments = model->forward(b.tokens, b.padding, positions, b.segments).logits;
  auto all_zero = model->forward(b.tokens, b.padding, positions, torch::zeros_like(b.segments)).logits;
  CATCH_CHECK_FALSE(torch::allclose(with_segments, all_zero));
}

CATCH_TEST_CASE("attention mask: padding keys and, if causal, future keys are -inf", "[encoder]") {
  auto padding = torch::tensor({0, 0, 1}, torch::kBool).unsqueeze(0);
  auto bidirectional = attention_mask(padding, false);
  CATCH_CHECK(bidirectional.sizes() == torch::IntArrayRef({1, 1, 1, 3}));
  CATCH_CHECK(std::isinf(bidirectional[0][0][0][2].item<float>()));
  CATCH_CHECK(bidirectional[0][0][0][1].item<float>() == 0.0f);
  auto causal = attention_mask(padding, true);
  CATCH_CHECK(causal.sizes() == torch::IntArrayRef({1, 1, 3, 3}));
  CATCH_CHECK(std::isinf(causal[0][0][0][1].item<float>()));   // query 0 cannot see key 1
  CATCH_CHECK(causal[0][0][1][0].item<float>() == 0.0f);       // query 1 sees key 0
  CATCH_CHECK(std::isinf(causal[0][0][2][2].item<float>()));   // padding key
}

CATCH_TEST_CASE("the encoder checks its input shapes", "[encoder]") {
  auto config = test::tiny_config();
  auto task = test::default_task("reverse_string");
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  auto tokens = torch::ones({2, 4}, torch::kInt64);
  CATCH_CHECK_THROWS_WITH(model->forward(tokens, torch::zeros({2, 5}, torch::kBool), contiguous_positions(2, 4)),
                          Catch::Matchers::Contains("padding [2, 5] must match tokens [2, 4]"));
}

CATCH_TEST_CASE("FLOP count of the encoder: every matrix product of one layer, by hand", "[encoder][flops]") {
  ModelConfig m;
  m.d_model = 64;
  m.num_layers = 1;
  m.d_ff = 256;
  // B = 2, T = 10, C = 3: qkv 2*20*64*192, out 2*20*64*64, QK^T and PV 2 * 2*2*10*10*64,
  // feed-forward 2 * 2*20*64*256, head 2*20*64*3
  const double expected = 2.0 * 20 * 64 * 192 + 2.0 * 20 * 64 * 64 + 2 * (2.0 * 2 * 10 * 10 * 64) +
                          2 * (2.0 * 20 * 64 * 256) + 2.0 * 20 * 64 * 3;
  CATCH_CHECK(encoder_forward_flops(m, 2, 10, 3) == Approx(expected));
  CATCH_CHECK(encoder_training_flops(m, 2, 10, 3) == Approx(3 * expected));
  m.num_layers = 5;  // layers scale the blocks, not the head
  CATCH_CHECK(encoder_forward_flops(m, 2, 10, 3) == Approx(5 * (expected - 2.0 * 20 * 64 * 3) + 2.0 * 20 * 64 * 3));
}

CATCH_TEST_CASE("batch_parallel_matmul equals torch::matmul, values and gradients, on strided inputs", "[encoder]") {
  torch::manual_seed(3);
  auto qkv = torch::randn({3, 2, 7, 3, 5}).permute({2, 0, 3, 1, 4});  // (3, B, H, T, Dh) views as attention has
  auto q = qkv[0].detach().requires_grad_(), k = qkv[1].detach().requires_grad_();
  auto q_ref = q.detach().clone().requires_grad_(), k_ref = k.detach().clone().requires_grad_();
  auto scores = batch_parallel_matmul(q, k.transpose(-2, -1));  // (B, H, T, T)
  auto expected = torch::matmul(q_ref, k_ref.transpose(-2, -1));
  CATCH_REQUIRE(scores.sizes() == expected.sizes());
  CATCH_CHECK(torch::allclose(scores, expected, 1e-5, 1e-6));
  scores.add_(1.0);  // callers add biases in place: the result is not a view
  auto weights = torch::randn_like(expected);
  (scores * weights).sum().backward();
  (expected * weights).sum().backward();
  CATCH_CHECK(torch::allclose(q.grad(), q_ref.grad(), 1e-5, 1e-6));
  CATCH_CHECK(torch::allclose(k.grad(), k_ref.grad(), 1e-5, 1e-6));
  CATCH_CHECK_THROWS_WITH(batch_parallel_matmul(torch::randn({2, 3, 4}), torch::randn({2, 5, 4})),
                          Catch::Matchers::Contains("inner dimensions differ"));
}
