#include "tests/catch.h"

#include "core/model/batched_matmul.h"
#include "core/kernels/attention.h"
#include "core/model/attention_dropout.h"
#include "core/model/attention_mask.h"
#include "core/model/fused_attention.h"
#include "core/model/flops.h"
#include "core/model/gelu.h"
#include "core/model/layer_norm.h"
#include "core/encodings/layer_mix.h"
#include "core/run/run.h"
#include "core/train/trainer.h"
#include "core/encodings/registry.h"
#include "data/task_registry.h"
#include "core/encodings/position_sampler.h"
#include "tests/support.h"

#include <ATen/record_function.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <set>

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
// A tiny_config model with `overrides`, seeded, in eval mode.
Encoder tiny_model(const std::vector<std::string>& overrides, const Task& task) {
  auto config = test::tiny_config(overrides);
  torch::manual_seed(0);
  Encoder model(config.model, config.encoding, task.vocab_size(), task.num_classes());
  model->eval();
  return model;
}
// The logits on b (attention maps asked for or not: with them, the unfused path) and every
// parameter's gradient of a fixed weighting of them.
std::vector<torch::Tensor> logits_and_gradients(Encoder& model, const Batch& b, bool maps,
                                                const Positions* given = nullptr) {
  model->zero_grad();
  const auto positions = given ? *given : contiguous_positions(b.tokens.size(0), b.tokens.size(1));
  auto logits = model->forward(b.tokens, b.padding, positions, b.segments, {maps, false}).logits;
  (logits * torch::linspace(-1, 1, logits.numel()).view(logits.sizes())).sum().backward();
  std::vector<torch::Tensor> out = {logits.detach()};
  for (const auto& p : model->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}
// Two logits_and_gradients results agree: logits to 1e-5, gradients to 1e-4.
void check_same_logits_and_gradients(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  CATCH_REQUIRE(a.size() == b.size());
  CATCH_CHECK(torch::allclose(a[0], b[0], 1e-5, 1e-6));
  for (size_t n = 1; n < a.size(); ++n) {
    CATCH_CAPTURE(n);
    CATCH_CHECK(torch::allclose(a[n], b[n], 1e-4, 1e-5));
  }
}
// f(isa, threads) for every kernel copy this CPU runs, with 1 and then 2 threads; the widest
// copy and the thread count are restored afterwards
template <class Function>
void for_each_kernel_copy_and_thread_count(const Function& f) {
  const int threads = torch::get_num_threads();
  for (const auto& isa : kernels::supported_instruction_sets()) {
    kernels::use_instruction_set(isa);
    for (int n : {1, 2}) {
      torch::set_num_threads(n);
      f(isa, n);
    }
  }
  torch::set_num_threads(threads);
  kernels::use_instruction_set(kernels::supported_instruction_sets().back());
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

CATCH_TEST_CASE("encoding_mix: blocks every-1, 2 every-1, ... use the other scheme, hook by hook", "[encoder][mix]") {
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config({"model.num_layers=4", "encoding.name=rope", "encoding_mix.name=alibi",
                                   "encoding_mix.every=2"});
  Encoder model = build_model(config, *task);
  auto& mix = dynamic_cast<LayerMixImpl&>(model->encoding());
  CATCH_CHECK((!mix.mixed_at(kInputLayer) && !mix.mixed_at(0) && mix.mixed_at(1) && !mix.mixed_at(2) &&
               mix.mixed_at(3)));
  torch::manual_seed(5);
  auto q = torch::randn({1, 4, 6, 8}), k = torch::randn({1, 4, 6, 8}), w = torch::randn({96, 32}), b = torch::randn({96});
  const Positions positions = contiguous_positions(1, 6);
  const AttentionContext rope_block{positions, 0, w, b}, alibi_block{positions, 1, w, b};
  CATCH_CHECK_FALSE(mix.score_bias(q, k, rope_block).defined());  // rope: a rotation, no bias
  CATCH_CHECK_FALSE(torch::equal(mix.rotate(q, k, rope_block).first, q));
  CATCH_CHECK(mix.score_bias(q, k, alibi_block).defined());  // alibi: a bias, no rotation
  CATCH_CHECK(torch::equal(mix.rotate(q, k, alibi_block).first, q));
  // the resolved config says so, and reads back
  const std::string yaml = to_yaml(config);
  CATCH_CHECK_THAT(yaml, test::ContainsText("encoding_mix:\n  name: alibi\n  every: 2\n"));
  CATCH_CHECK(to_yaml(parse_run_config(yaml, "resolved.yaml", {}, scheme_catalog(), task_catalog())) == yaml);

  // a mix whose other scheme no block uses is the main scheme itself
  auto rope = test::tiny_config({"encoding.name=rope"});
  auto unused = test::tiny_config({"encoding.name=rope", "encoding_mix.every=8"});  // 2 blocks: none mixed
  Rng rng(3);
  const Batch batch = task->sample(2, 5, rng);
  auto logits = [&](const RunConfig& c) {
    Encoder m = build_model(c, *task);
    m->eval();
    const auto p = contiguous_positions(batch.tokens.size(0), batch.tokens.size(1));
    return m->forward(batch.tokens, batch.padding, p, batch.segments).logits;
  };
  CATCH_CHECK(torch::equal(logits(rope), logits(unused)));

  // parameters by scheme, every one trained; schemes that scale scores apart are refused
  auto tables = test::tiny_config({"encoding.name=learned", "encoding_mix.name=t5_bias", "encoding_mix.every=2",
                                   "train.steps=6", "train.unused_parameters_steps=3"});
  Encoder with_tables = build_model(tables, *task);
  auto names = with_tables->named_parameters();
  CATCH_CHECK((names.contains("position_encoding.main.table") &&
               names.contains("position_encoding.mixed.relative_attention_bias")));
  Trainer trainer(tables, with_tables, *task, torch::kCPU);
  std::ostringstream log;
  trainer.train(log, false);
  CATCH_CHECK(trainer.trained_rows().size() == 2u);

  // per-block parameters only for the blocks a scheme serves (block 0: main, block 1: mixed),
  // so a mix trains under the default unused-parameter check (train.unused_parameters: error)
  struct Mix {
    std::string main, mixed;
    std::vector<std::string> present, absent;
  };
  for (const Mix& mix : {Mix{"relative_key", "fire", {"main.distance_embedding_0", "mixed.c_1", "mixed.hidden.1.weight"},
                             {"main.distance_embedding_1", "mixed.c_0", "mixed.hidden.0.weight"}},
                         Mix{"rope", "cope", {"mixed.table_1"}, {"mixed.table_0"}},
                         Mix{"shaw", "transformer_xl", {"main.key_table_0", "mixed.r_projection_1"},
                             {"main.key_table_1", "mixed.r_projection_0"}}}) {
    CATCH_CAPTURE(mix.main, mix.mixed);
    auto config = test::tiny_config({"encoding.name=" + mix.main, "encoding_mix.name=" + mix.mixed,
                                     "encoding_mix.every=2", "train.steps=6", "train.unused_parameters_steps=3"});
    Encoder model = build_model(config, *task);
    auto parameters = model->named_parameters();
    for (const auto& name : mix.present) CATCH_CHECK(parameters.contains("position_encoding." + name));
    for (const auto& name : mix.absent) CATCH_CHECK_FALSE(parameters.contains("position_encoding." + name));
    Trainer mixed_trainer(config, model, *task, torch::kCPU);
    std::ostringstream mixed_log;
    CATCH_CHECK_NOTHROW(mixed_trainer.train(mixed_log, false));
  }
  CATCH_CHECK_THROWS_WITH(build_model(test::tiny_config({"encoding.name=tupe", "encoding_mix.name=rope",
                                                         "encoding_mix.every=2"}), *task),
                          test::ContainsText("encoding_mix: 'tupe' and 'rope' scale the scores differently"));
}

CATCH_TEST_CASE("the token table's initial scale and sqrt(d_model) multiplier follow the config", "[encoder]") {
  auto task = test::default_task("reverse_string");
  // Ruoss et al.'s code: a table of standard deviation 0.02, embeddings times sqrt(d_model)
  Encoder ruoss = tiny_model({"model.embedding_init_std=0.02", "model.embedding_scale=sqrt_d_model",
                              "model.embedding_layer_norm=false", "encoding.name=none"}, *task);
  const auto table = ruoss->named_parameters()["token_embedding.weight"];
  CATCH_CHECK(table[kPadToken].abs().max().item<float>() == 0.0f);  // padding stays zero
  const auto rows = table.slice(0, 1);
  const double n = double(rows.numel()), std = rows.std().item<double>();
  CATCH_CHECK(std::abs(std - 0.02) < 4 * 0.02 / std::sqrt(2 * n));  // 4 sigma of the sample std
  Batch b = batch();
  ForwardRequest request;
  request.hidden_states = true;
  const auto positions = contiguous_positions(b.tokens.size(0), b.tokens.size(1));
  const auto input = ruoss->forward(b.tokens, b.padding, positions, {}, request).hidden_states[0];
  const double d_model = double(test::tiny_config().model.d_model);
  CATCH_CHECK(torch::allclose(input, table.index({b.tokens}) * std::sqrt(d_model), 1e-6, 1e-7));
  // the default keeps LibTorch's N(0, 1) table with the same random draws: the table of a
  // plain Embedding made first after the same seed
  Encoder plain = tiny_model({"encoding.name=none"}, *task);
  torch::manual_seed(0);
  torch::nn::Embedding reference(
      torch::nn::EmbeddingOptions(task->vocab_size(), test::tiny_config().model.d_model).padding_idx(kPadToken));
  CATCH_CHECK(torch::equal(plain->named_parameters()["token_embedding.weight"], reference->weight));
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
  const AttentionMask bidirectional(padding, false);
  CATCH_CHECK(!bidirectional.causal());
  CATCH_CHECK(bidirectional.additive().sizes() == torch::IntArrayRef({1, 1, 1, 3}));
  CATCH_CHECK(torch::equal(bidirectional.additive(), bidirectional.padding()));
  CATCH_CHECK(std::isinf(bidirectional.additive()[0][0][0][2].item<float>()));
  CATCH_CHECK(bidirectional.additive()[0][0][0][1].item<float>() == 0.0f);
  const AttentionMask causal(padding, true);
  CATCH_CHECK(causal.causal());
  CATCH_CHECK(torch::equal(causal.padding(), bidirectional.padding()));  // what the CPU kernel takes
  const auto& full = causal.additive();
  CATCH_CHECK(full.sizes() == torch::IntArrayRef({1, 1, 3, 3}));
  CATCH_CHECK(std::isinf(full[0][0][0][1].item<float>()));   // query 0 cannot see key 1
  CATCH_CHECK(full[0][0][1][0].item<float>() == 0.0f);       // query 1 sees key 0
  CATCH_CHECK(std::isinf(full[0][0][2][2].item<float>()));   // padding key
  CATCH_CHECK(causal.additive().is_same(full));              // built once
  // nothing to mask: no tensor (attention then adds none); causal without padding: the
  // triangle alone, shared by the batch
  const auto no_padding = torch::zeros({2, 3}, torch::kBool);
  CATCH_CHECK(!AttentionMask(no_padding, false).any());
  CATCH_CHECK(!AttentionMask(no_padding, false).additive().defined());
  CATCH_CHECK(!AttentionMask().any());
  const AttentionMask causal_only(no_padding, true);
  CATCH_CHECK(causal_only.any());
  CATCH_CHECK(!causal_only.padding().defined());
  CATCH_CHECK(torch::equal(causal_only.additive(),
                           torch::full({3, 3}, -std::numeric_limits<float>::infinity()).triu(1).view({1, 1, 3, 3})));
  CATCH_CHECK_THROWS_WITH(AttentionMask(torch::zeros({3}), false),
                          Catch::Matchers::StartsWith("attention mask: padding must be (B, T) bool, got [3]"));
}

CATCH_TEST_CASE("the encoder checks its input shapes", "[encoder]") {
  auto config = test::tiny_config();
  auto task = test::default_task("reverse_string");
  Encoder model(config.model, config.encoding, task->vocab_size(), task->num_classes());
  auto tokens = torch::ones({2, 4}, torch::kInt64);
  CATCH_CHECK_THROWS_WITH(model->forward(tokens, torch::zeros({2, 5}, torch::kBool), contiguous_positions(2, 4)),
                          test::ContainsText("padding [2, 5] must match tokens [2, 4]"));
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
  m.num_layers = 1;
  m.causal = true;  // QK^T and PV over the 55 pairs (i, j <= i) of 10 tokens, not 100
  CATCH_CHECK(encoder_forward_flops(m, 2, 10, 3) == Approx(expected - 2 * (2.0 * 2 * 45 * 64)));
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
                          test::ContainsText("inner dimensions differ"));
}

namespace {
// softmax(q k^T * scale + bias + mask) v by plain LibTorch operations.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  double scale, const torch::Tensor& bias, const AttentionMask& mask) {
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  if (bias.defined()) scores = scores + bias;
  if (mask.any()) scores = scores + mask.additive();
  return torch::matmul(torch::softmax(scores, -1), v);
}

// out and expected, both functions of `inputs`, have the same gradients with respect to
// each input (through a random weighting of their elements).
void check_same_gradients(const torch::Tensor& out, const torch::Tensor& expected,
                          const std::vector<torch::Tensor>& inputs) {
  auto weights = torch::randn_like(expected);
  auto grads = torch::autograd::grad({(out * weights).sum()}, inputs);
  auto expected_grads = torch::autograd::grad({(expected * weights).sum()}, inputs);
  for (size_t n = 0; n < inputs.size(); ++n) {
    CATCH_CAPTURE(n);
    CATCH_REQUIRE(grads[n].sizes() == inputs[n].sizes());
    // a gradient summed over many terms (a clipped table's end rows: over ~T^2 / 2 scores)
    // is as exact as its largest elements allow
    const double scale = std::max(1.0, expected_grads[n].abs().max().item<double>());
    CATCH_CHECK(torch::allclose(grads[n], expected_grads[n], 1e-4, 1e-5 * scale));
  }
}
}  // namespace

CATCH_TEST_CASE("fused_attention equals softmax(q k^T s + bias + mask) v, values and gradients", "[encoder]") {
  // head sizes on and off the vector width, lengths on and off the 16-lane blocks, biases
  // broadcast over batch, heads or query rows (their gradients summed over what they
  // broadcast over, by several threads), padding and causal masks
  struct Case {
    int64_t B, H, T, Dh;
    std::vector<int64_t> bias_shape;  // empty: no bias
    bool causal, padding;
  };
  const std::vector<Case> cases = {{2, 3, 7, 8, {}, false, false},      {3, 2, 16, 8, {1, 2, 16, 16}, true, false},
                                   {2, 4, 21, 12, {2, 1, 21, 21}, false, true}, {1, 2, 40, 32, {1, 2, 40, 40}, true, true},
                                   {2, 2, 5, 3, {2, 2, 5, 5}, false, true},
                                   // a full bias (its gradient written, whole vectors by
                                   // streaming stores) and one shared by all queries' rows
                                   {2, 3, 48, 8, {2, 3, 48, 48}, true, true}, {2, 2, 33, 8, {2, 1, 1, 33}, false, true},
                                   // a batch-shared bias with a block of >= 64K cells: the
                                   // backward walks the pairs head-major
                                   {3, 2, 260, 8, {1, 2, 260, 260}, false, true},
                                   // several query blocks (the last one partial) and products
                                   // longer than one depth block (kQueryBlock, kDepthBlock)
                                   {1, 2, 150, 16, {1, 2, 150, 150}, true, true},
                                   // causal over several blocks with a full bias: the
                                   // gradient's cells past a block's last query are zeros
                                   {2, 2, 140, 8, {2, 2, 140, 140}, true, false},
                                   {1, 3, 97, 32, {}, true, true},
                                   // rows of a multiple of 128 keys: the saved probabilities'
                                   // rows padded (probability_row_stride)
                                   {2, 2, 128, 32, {}, false, true}};
  // every copy of the kernels this CPU can run (AVX-512, AVX2 + FMA, baseline)
  const auto instruction_sets = kernels::supported_instruction_sets();
  CATCH_REQUIRE(instruction_sets.front() == "baseline");
  CATCH_REQUIRE(kernels::instruction_set_in_use() == instruction_sets.back());  // the widest by default
  for (size_t run = 0; run < instruction_sets.size() * cases.size(); ++run) {
    const auto& isa = instruction_sets[run / cases.size()];
    const auto& c = cases[run % cases.size()];
    kernels::use_instruction_set(isa);
    CATCH_CAPTURE(isa, c.B, c.H, c.T, c.Dh, c.bias_shape.size(), c.causal, c.padding);
    torch::manual_seed(c.T);
    // q, k, v as strided views of one projection, as attention passes them
    auto qkv = torch::randn({c.B, c.T, 3, c.H, c.Dh}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0].detach().requires_grad_(), k = qkv[1].detach().requires_grad_(),
         v = qkv[2].detach().requires_grad_();
    torch::Tensor bias;
    if (!c.bias_shape.empty()) bias = torch::randn(c.bias_shape).requires_grad_();
    auto padding = torch::zeros({c.B, c.T}, torch::kBool);
    if (c.padding) padding.index_put_({0, torch::indexing::Slice(c.T - 2)}, true);
    const AttentionMask mask(padding, c.causal);
    const double scale = 1.0 / std::sqrt(double(c.Dh));

    auto out = fused_attention(q, k, v, scale, bias, mask);
    auto expected = reference_attention(q, k, v, scale, bias, mask);
    CATCH_REQUIRE(out.sizes() == expected.sizes());
    CATCH_CHECK(torch::allclose(out, expected, 1e-5, 1e-6));
    // the output's memory is (B, T, H, Dh): merging the heads is a view
    CATCH_CHECK(out.transpose(1, 2).is_contiguous());

    std::vector<torch::Tensor> inputs = {q, k, v};
    if (bias.defined()) inputs.push_back(bias);
    check_same_gradients(out, expected, inputs);

    // q, k, v packed as the projection's (B, T, 3 H Dh) output: the same numbers, and the
    // gradients of the three views as one tensor
    auto packed = qkv.permute({1, 3, 0, 2, 4}).reshape({c.B, c.T, 3 * c.H * c.Dh}).detach().requires_grad_();
    const auto fixed_bias = bias.defined() ? bias.detach() : bias;
    auto packed_out = fused_attention_packed(packed, c.H, scale, fixed_bias, mask);
    auto separate_out = fused_attention(q, k, v, scale, fixed_bias, mask);
    CATCH_CHECK(torch::equal(packed_out, separate_out));
    const auto grad_out = torch::randn_like(separate_out);
    const auto grads = torch::autograd::grad({separate_out}, {q, k, v}, {grad_out});
    packed_out.backward(grad_out);
    const auto expected_packed_grad =
        torch::stack(grads).permute({1, 3, 0, 2, 4}).reshape({c.B, c.T, 3 * c.H * c.Dh});
    CATCH_CHECK(torch::equal(packed.grad(), expected_packed_grad));
  }
  kernels::use_instruction_set(instruction_sets.back());
  CATCH_CHECK_THROWS_WITH(fused_attention_packed(torch::zeros({2, 5, 20}), 3, 1.0, {}, {}),
                          Catch::Matchers::StartsWith("fused_attention_packed: expected qkv (B, T, 3 H Dh) for H = 3"));
  CATCH_CHECK_THROWS_WITH(kernels::use_instruction_set("sse9"),
                          test::ContainsText("cannot run the 'sse9' CPU kernels"));
  // probabilities and extreme scores: a row of huge scores soft-maxes to one-hot, finite
  auto q = torch::zeros({1, 1, 3, 8}), k = torch::zeros({1, 1, 3, 8}), v = torch::eye(3).view({1, 1, 3, 3});
  auto bias = torch::tensor({0.f, 200.f, -200.f, 0.f, 0.f, 0.f, -1e30f, -1e30f, 50.f}).view({1, 1, 3, 3});
  auto out = fused_attention(q, k, torch::nn::functional::pad(v, torch::nn::functional::PadFuncOptions({0, 5})),
                             1.0, bias, {});
  auto expected = torch::softmax(bias, -1);
  CATCH_CHECK(torch::allclose(out.slice(-1, 0, 3), expected, 1e-6, 1e-7));
  CATCH_CHECK(out.slice(-1, 0, 3)[0][0][1][0].item<float>() == Approx(1.0 / 3.0));
}

CATCH_TEST_CASE("gelu_activation equals x Phi(x) and its derivative, to float precision, for every kernel copy",
                "[encoder]") {
  // x: a grid over [-12, 12] (both tails, several parallel chunks, a length off the vector
  // width) and special values, as a non-contiguous (transposed) view
  auto grid = torch::linspace(-12.0, 12.0, 40001, torch::kFloat64);
  auto special = torch::tensor({0.0, -0.0, 1e-30, -1e-30, 87.0, -87.0, 1e4, -1e4, 0.5, -0.5, 3.0}, torch::kFloat64);
  auto x64 = torch::cat({grid, special});  // 40012 = 4 x 10003
  auto x = x64.to(torch::kFloat32).view({4, 10003}).t().detach().requires_grad_();
  CATCH_REQUIRE(!x.is_contiguous());
  const auto xd = x.detach().to(torch::kFloat64);
  const auto cdf = 0.5 * (1.0 + torch::erf(xd / std::sqrt(2.0)));
  const auto expected = xd * cdf;
  const auto expected_slope = cdf + xd * torch::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
  // grad_y: in [0.5, 1.5), non-contiguous like x; a fixed sequence (i times the golden ratio,
  // modulo 1), the same in every process and on every CPU
  const auto grad_y = (torch::frac(torch::arange(x.numel(), torch::kFloat64) * 0.6180339887498949) + 0.5)
                          .to(torch::kFloat32)
                          .view({4, 10003})
                          .t();
  const auto tolerance = 2e-7 * torch::clamp_min(xd.abs(), 1.0);  // float rounding of x Phi(x)
  for (const auto& isa : kernels::supported_instruction_sets()) {
    CATCH_CAPTURE(isa);
    kernels::use_instruction_set(isa);
    x.mutable_grad() = torch::Tensor();
    auto y = gelu_activation(x);
    CATCH_REQUIRE(y.sizes() == x.sizes());
    const auto error = (y.detach().to(torch::kFloat64) - expected).abs();
    CATCH_CHECK((error <= tolerance).all().item<bool>());
    CATCH_CAPTURE(error.max().item<double>());
    CATCH_CHECK(torch::allclose(y, torch::gelu(x), 1e-5, 1e-6));  // and LibTorch's own
    y.backward(grad_y);
    // the slope to twice the value's tolerance (exp's error enters Phi and phi), scaled by grad_y
    const auto grad_y64 = grad_y.to(torch::kFloat64);
    const auto slope_error = (x.grad().to(torch::kFloat64) - grad_y64 * expected_slope).abs();
    CATCH_CHECK((slope_error <= 2 * tolerance * grad_y64).all().item<bool>());
    // the far negative tail is Phi's small number itself (within A-S 7.1.26's 0.4% there),
    // not 1 minus a number close to 1 (which rounds to 0 in float32)
    const float tail = gelu_activation(torch::tensor({-6.0f}))[0].item<float>();
    CATCH_CHECK(tail == Approx(-6.0 * 0.5 * std::erfc(6.0 / std::sqrt(2.0))).epsilon(5e-3));
    CATCH_CHECK(std::isnan(gelu_activation(torch::tensor({NAN}))[0].item<float>()));
  }
  kernels::use_instruction_set(kernels::supported_instruction_sets().back());
  // anything but float32 on the CPU is LibTorch's gelu, values and gradients
  auto x_double = xd.clone().requires_grad_();
  auto y_double = gelu_activation(x_double);
  CATCH_CHECK(torch::equal(y_double, torch::gelu(xd)));
  y_double.sum().backward();
  auto x_reference = xd.clone().requires_grad_();
  torch::gelu(x_reference).sum().backward();
  CATCH_CHECK(torch::equal(x_double.grad(), x_reference.grad()));
}

CATCH_TEST_CASE("gelu_activation with a bias equals gelu(x + bias): values, both gradients, any thread count",
                "[encoder]") {
  // 500 rows of 100: chunks of 163 rows, the last one partial; x a non-contiguous view
  torch::manual_seed(3);
  auto x = (3 * torch::randn({100, 500})).t().detach().requires_grad_();
  auto bias = torch::randn({100}).requires_grad_();
  CATCH_REQUIRE(!x.is_contiguous());
  const auto grad_y = torch::rand({500, 100}) + 0.5;
  auto xd = x.detach().to(torch::kFloat64).requires_grad_();
  auto bd = bias.detach().to(torch::kFloat64).requires_grad_();
  auto expected = torch::gelu(xd + bd);
  expected.backward(grad_y.to(torch::kFloat64));
  torch::Tensor bias_grad_one_thread;
  for_each_kernel_copy_and_thread_count([&](const std::string& isa, int n) {
    CATCH_CAPTURE(isa, n);
    x.mutable_grad() = torch::Tensor();
    bias.mutable_grad() = torch::Tensor();
    auto y = gelu_activation(x, bias);
    CATCH_CHECK(torch::allclose(y.to(torch::kFloat64), expected, 1e-6, 1e-6));
    y.backward(grad_y);
    CATCH_CHECK(torch::allclose(x.grad().to(torch::kFloat64), xd.grad(), 1e-5, 1e-6));
    CATCH_CHECK(torch::allclose(bias.grad().to(torch::kFloat64), bd.grad(), 1e-5, 1e-4));
    if (n == 1) bias_grad_one_thread = bias.grad().clone();
    else CATCH_CHECK(torch::equal(bias.grad(), bias_grad_one_thread));  // summed in chunk order
  });
  // without a gradient for the bias (a frozen layer), and off the kernel (float64)
  x.mutable_grad() = torch::Tensor();
  gelu_activation(x, bias.detach()).backward(grad_y);
  CATCH_CHECK(torch::allclose(x.grad().to(torch::kFloat64), xd.grad(), 1e-5, 1e-6));
  auto y_double = gelu_activation(xd.detach(), bd.detach());
  CATCH_CHECK(torch::equal(y_double, torch::gelu(xd.detach() + bd.detach())));
  CATCH_CHECK_THROWS_WITH(gelu_activation(x, torch::zeros({99})),
                          "gelu_activation: the bias must have shape (100), one value per last-dimension entry of x");
}

CATCH_TEST_CASE("layer_norm equals torch::layer_norm: values and the gradients of x, weight and bias", "[encoder]") {
  // rows of 64 (whole vectors) and of 37 (a tail), enough rows for several chunks, x a
  // non-contiguous view; offset and scaled inputs (a large mean next to a small spread)
  for (int64_t cols : {64, 37}) {
    torch::manual_seed(cols);
    auto x = (5 + 2 * torch::randn({cols, 700})).t().detach().requires_grad_();
    auto weight = (1 + 0.3 * torch::randn({cols})).requires_grad_(), bias = torch::randn({cols}).requires_grad_();
    CATCH_REQUIRE(!x.is_contiguous());
    const auto grad_y = torch::randn({700, cols});
    auto xd = x.detach().to(torch::kFloat64).requires_grad_();
    auto wd = weight.detach().to(torch::kFloat64).requires_grad_(), bd = bias.detach().to(torch::kFloat64).requires_grad_();
    auto expected = torch::layer_norm(xd, {cols}, wd, bd, 1e-5);
    expected.backward(grad_y.to(torch::kFloat64));
    torch::Tensor weight_grad_one_thread;
    for_each_kernel_copy_and_thread_count([&](const std::string& isa, int n) {
      CATCH_CAPTURE(cols, isa, n);
      for (auto* t : {&x, &weight, &bias}) t->mutable_grad() = torch::Tensor();
      auto y = layer_norm(x, weight, bias, 1e-5);
      CATCH_CHECK(torch::allclose(y.to(torch::kFloat64), expected, 1e-5, 1e-5));
      y.backward(grad_y);
      CATCH_CHECK(torch::allclose(x.grad().to(torch::kFloat64), xd.grad(), 1e-4, 1e-5));
      CATCH_CHECK(torch::allclose(weight.grad().to(torch::kFloat64), wd.grad(), 1e-4, 1e-4));
      CATCH_CHECK(torch::allclose(bias.grad().to(torch::kFloat64), bd.grad(), 1e-5, 1e-4));
      if (n == 1) weight_grad_one_thread = weight.grad().clone();
      else CATCH_CHECK(torch::equal(weight.grad(), weight_grad_one_thread));  // summed in chunk order
    });
  }
  // the module form uses the module's parameters and eps; float64 goes to torch::layer_norm
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({8}).eps(0.5));
  const auto x = torch::randn({3, 8});
  CATCH_CHECK(torch::allclose(layer_norm(norm, x), norm->forward(x), 1e-5, 1e-6));
  const auto xd = x.to(torch::kFloat64);
  CATCH_CHECK(torch::equal(layer_norm(xd, norm->weight.to(torch::kFloat64), norm->bias.to(torch::kFloat64), 0.5),
                           torch::layer_norm(xd, {8}, norm->weight.to(torch::kFloat64), norm->bias.to(torch::kFloat64), 0.5)));
}

namespace {
// Every registered scheme variant (test::all_scheme_variants), plus numeric settings that
// take other kernel paths at tiny_config's lengths: clip 2 (clipped tables, whose far offsets
// share the end rows) and DeBERTa's log buckets and clamp (tables given by runs of offsets).
std::vector<test::SchemeVariant> variants_for_path_tests() {
  auto variants = test::all_scheme_variants();
  for (const char* scheme : {"relative_key", "shaw"}) variants.push_back(test::scheme_variant(scheme, {{"clip", int64_t{2}}}));
  variants.push_back(
      test::scheme_variant("deberta", {{"position_buckets", int64_t{4}}, {"max_relative_positions", int64_t{8}}}));
  variants.push_back(
      test::scheme_variant("deberta", {{"position_buckets", int64_t{0}}, {"max_relative_positions", int64_t{3}}}));
  return variants;
}
}  // namespace

CATCH_TEST_CASE("the encoder's fused attention path equals the unfused one, values and gradients", "[encoder]") {
  // asking for attention maps takes the unfused path (it keeps the probabilities); the
  // relative schemes' rows (relative_rows) are checked against their score_bias / value_term
  Batch b = batch();
  auto task = test::default_task("reverse_string");
  for (const auto& mode : test::in_each_mode(variants_for_path_tests())) {
    CATCH_CAPTURE(mode.label());
    Encoder model = test::model_for(test::tiny_config_in_mode(mode.causal), mode.variant, *task);
    const auto fused = logits_and_gradients(model, b, false), unfused = logits_and_gradients(model, b, true);
    check_same_logits_and_gradients(fused, unfused);
  }
}

CATCH_TEST_CASE("real-valued positions: schemes with tables refuse them, the others run fused and unfused alike",
                "[encoder][continuous]") {
  Batch b = batch();
  auto task = test::default_task("reverse_string");
  PositionsConfig cape;
  cape.sampler = "cape";
  Rng rng(11);
  const Positions real = PositionSampler(cape).sample(b.tokens.size(0), b.tokens.size(1), rng, torch::kCPU);
  CATCH_REQUIRE(real_positions(real));
  for (const auto& mode : test::in_each_mode(variants_for_path_tests())) {
    CATCH_CAPTURE(mode.label());
    Encoder model = test::model_for(test::tiny_config_in_mode(mode.causal), mode.variant, *task);
    if (!model->encoding().position_tables().empty()) {
      CATCH_CHECK_THROWS_WITH(model->forward(b.tokens, b.padding, real, b.segments),
                              test::ContainsText(mode.variant.scheme + ": real-valued positions cannot index"));
      continue;
    }
    const auto fused = logits_and_gradients(model, b, false, &real), unfused = logits_and_gradients(model, b, true, &real);
    check_same_logits_and_gradients(fused, unfused);
    CATCH_CHECK(torch::isfinite(fused[0]).all().item<bool>());
  }
}

#if TORCH_VERSION_MAJOR >= 2
// Debian 12's LibTorch 1.13 has no scaled_dot_product_attention, so this test exists only
// under LibTorch 2.x (scripts/debian13-check.sh runs it on the CPU).
namespace {
std::atomic<int> sdpa_calls{0}, sdpa_causal_calls{0};  // the latter: is_causal, no mask
std::unique_ptr<at::ObserverContext> count_sdpa(const at::RecordFunction& op) {
  if (std::strcmp(op.name(), "aten::scaled_dot_product_attention") != 0) return nullptr;
  ++sdpa_calls;
  const auto inputs = op.inputs();  // query, key, value, attn_mask, dropout_p, is_causal, ...
  if (inputs.size() > 5 && inputs[5].isBool() && inputs[5].toBool() && inputs[3].isNone()) ++sdpa_causal_calls;
  return nullptr;
}
struct SdpaOnCpu {  // while alive, attention takes the GPU's SDPA branch on the CPU
  SdpaOnCpu() { use_sdpa_on_cpu(true); }
  ~SdpaOnCpu() { use_sdpa_on_cpu(false); }
};
}  // namespace

CATCH_TEST_CASE("scaled_dot_product_attention (the GPU's branch) equals the unfused path, values and gradients",
                "[encoder][sdpa]") {
  // the additive mask (padding keys, causal), the bias alone when no key is masked, no mask
  // at all, and q pre-scaled for the scheme's scale, as a GPU run uses them
  auto task = test::default_task("reverse_string");
  const Batch unpadded = batch();
  CATCH_REQUIRE_FALSE(unpadded.padding.any().item<bool>());
  Batch padded = unpadded;  // the second sequence's last two tokens are padding
  padded.padding = unpadded.padding.clone();
  padded.padding[1].narrow(0, padded.padding.size(1) - 2, 2).fill_(1);
  const ModelConfig model_config = test::tiny_config().model;
  const int64_t layers = model_config.num_layers;  // one SDPA call each
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(count_sdpa).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  for (const auto& mode : test::in_each_mode(variants_for_path_tests())) {
    CATCH_CAPTURE(mode.label());
    Encoder model = test::model_for(test::tiny_config_in_mode(mode.causal), mode.variant, *task);
    // SDPA takes every scheme without a value term (Shaw's values need the probabilities);
    // is_causal (the flash kernel's way) where a causal batch has no padding and the scheme no bias
    // (nor a scheme that replaces the softmax: stick-breaking)
    const bool takes_sdpa = !model->encoding().has_value_term() && !model->encoding().replaces_softmax_at(0);
    const int64_t D = model_config.d_model, H = model_config.num_heads;
    const auto probe = torch::zeros({1, H, 3, D / H});  // q and k of 3 tokens
    const auto probe_input = torch::zeros({1, 3, D});  // the layer input data-dependent schemes read (FoX, PaTH)
    const Positions probe_positions = contiguous_positions(1, 3);
    const auto qkv_weight = torch::zeros({3 * D, D}), qkv_bias = torch::zeros({3 * D});
    const bool has_bias =
        model->encoding().score_bias(probe, probe, {probe_positions, 0, qkv_weight, qkv_bias, &probe_input}).defined();
    for (const Batch* b : std::vector<const Batch*>{&padded, &unpadded}) {
      CATCH_CAPTURE(b == &padded);
      const auto unfused = logits_and_gradients(model, *b, true);
      sdpa_calls = 0;
      sdpa_causal_calls = 0;
      std::vector<torch::Tensor> sdpa;
      {
        SdpaOnCpu on;
        sdpa = logits_and_gradients(model, *b, false);
      }
      CATCH_CHECK(sdpa_calls == (takes_sdpa ? layers : 0));
      const bool only_causal = takes_sdpa && mode.causal && b == &unpadded && !has_bias;
      CATCH_CHECK(sdpa_causal_calls == (only_causal ? layers : 0));
      check_same_logits_and_gradients(sdpa, unfused);
    }
  }
  at::removeCallback(handle);
}
#endif

CATCH_TEST_CASE("fused_attention's relative rows equal HF's (T, T, Dh) embeddings, values and gradients",
                "[encoder]") {
  // scores = s (q k^T + q' . Rq[i - j] + k_j . Rk[i - j]), out = p (v + Rv[i - j]), each
  // term alone and all together, tables shared by the heads or per head, q' = q or its own;
  // with clip > 0 the query and value tables have 2 clip + 1 rows (Shaw's clipping); with
  // runs, one row per run of neighbouring offsets (DeBERTa's log buckets)
  struct Case {
    bool query, key, value, per_head, offset_query;
    int64_t clip;
    bool runs = false;
  };
  const std::vector<Case> cases = {{true, false, false, false, false, 0}, {false, true, false, true, false, 0},
                                   {false, false, true, false, false, 0}, {true, true, false, true, false, 0},
                                   {true, false, true, false, false, 0},  {true, true, true, true, true, 0},
                                   {true, false, true, false, false, 3},  {true, true, true, true, true, 3},
                                   {false, false, true, true, false, 9},  {true, true, false, true, false, 0, true},
                                   {true, true, true, false, true, 0, true}, {false, true, false, false, false, 0, true}};
  for (const auto& isa : kernels::supported_instruction_sets()) {
    kernels::use_instruction_set(isa);
    // 150: several query blocks, the last one partial; 128: padded probability rows
    for (int64_t T : {5, 17, 40, 128, 150}) {
      for (int64_t Dh : {8, 6}) {
        for (const auto& c : cases) {
          CATCH_CAPTURE(isa, T, Dh, c.query, c.key, c.value, c.per_head, c.offset_query, c.clip, c.runs);
          torch::manual_seed(T + Dh);
          const int64_t B = 2, H = 3;
          // runs: each offset starts a new run with probability 0.4 (runs of 1 to about 10)
          torch::Tensor runs;
          if (c.runs)
            runs = torch::cat({torch::zeros({1}, torch::kInt64), (torch::rand({2 * T - 2}) < 0.4).to(torch::kInt64)})
                       .cumsum(0);
          auto q = torch::randn({B, H, T, Dh}).requires_grad_(), k = torch::randn({B, H, T, Dh}).requires_grad_(),
               v = torch::randn({B, H, T, Dh}).requires_grad_(), q2 = torch::randn({B, H, T, Dh}).requires_grad_();
          auto table = [&](bool used, int64_t rows) {  // ascending offsets
            if (!used) return torch::Tensor();
            return (c.per_head ? torch::randn({H, rows, Dh}) : torch::randn({rows, Dh})).requires_grad_();
          };
          const int64_t full_rows = c.runs ? runs[-1].item<int64_t>() + 1 : 2 * T - 1,
                        clipped_rows = c.clip > 0 ? 2 * c.clip + 1 : full_rows;
          RelativeRows rows{table(c.query, clipped_rows), table(c.key, full_rows), table(c.value, clipped_rows),
                            c.offset_query ? q2 : torch::Tensor(), {}, c.clip, runs};
          // causal at 5, 17 and 150 (three query blocks, each computing only the keys its
          // queries see)
          const AttentionMask mask(torch::zeros({B, T}, torch::kBool), T % 2 == 1 || T == 150);
          const double scale = 1.0 / std::sqrt(double(Dh));
          // HF's way: the (T, T, Dh) embeddings of query - key (per head: (H, T, T, Dh)), einsums
          auto i = torch::arange(T);
          auto offsets = i.view({T, 1}) - i.view({1, T});
          auto embeddings = [&](const torch::Tensor& t, bool clipped) {
            auto index = clipped && c.clip > 0 ? offsets.clamp(-c.clip, c.clip) + c.clip : offsets + (T - 1);
            if (c.runs) index = runs.index_select(0, index.reshape(-1)).view({T, T});
            auto picked = t.index_select(-2, index.reshape(-1));
            return c.per_head ? picked.view({1, H, T, T, Dh}) : picked.view({1, 1, T, T, Dh});
          };
          auto scores = torch::matmul(q, k.transpose(-2, -1));
          if (c.query) scores = scores + ((c.offset_query ? q2 : q).unsqueeze(3) * embeddings(rows.query, true)).sum(-1);
          if (c.key) scores = scores + (k.unsqueeze(2) * embeddings(rows.key, false)).sum(-1);
          auto probs = torch::softmax(mask.any() ? scores * scale + mask.additive() : scores * scale, -1);
          auto expected = torch::matmul(probs, v);
          if (c.value) expected = expected + (probs.unsqueeze(-1) * embeddings(rows.value, true)).sum(3);
          auto out = fused_attention(q, k, v, scale, {}, mask, rows);
          // outputs up to about 4, sums of 2T terms in float: 1.2e-6 apart at T 128
          CATCH_CHECK(torch::allclose(out, expected, 1e-5, 4e-6));
          std::vector<torch::Tensor> inputs = {q, k, v};
          for (const auto& t : {rows.query, rows.key, rows.value, rows.offset_query})
            if (t.defined()) inputs.push_back(t);
          check_same_gradients(out, expected, inputs);
        }
      }
    }
  }
  kernels::use_instruction_set(kernels::supported_instruction_sets().back());
  auto x = torch::randn({1, 2, 4, 8});
  CATCH_CHECK_THROWS_WITH(fused_attention(x, x, x, 1.0, {}, {}, {torch::randn({6, 8})}),
                          test::ContainsText("query rows must be (2T - 1, Dh) = (7, 8) or (H, 2T - 1, Dh) = (2, 7, 8)"));
  CATCH_CHECK_THROWS_WITH(fused_attention(x, x, x, 1.0, {}, {}, {{}, {}, torch::randn({7, 8}), {}, {}, 2}),
                          test::ContainsText("value rows must be (2 clip + 1, Dh) = (5, 8)"));
  CATCH_CHECK_THROWS_WITH(fused_attention(x, x, x, 1.0, {}, {}, {{}, torch::randn({3, 7, 8})}),
                          test::ContainsText("key rows must be"));
  CATCH_CHECK_THROWS_WITH(fused_attention(x, torch::randn({1, 2, 5, 8}), torch::randn({1, 2, 5, 8}), 1.0, {}, {},
                                          {{}, {}, torch::randn({9, 8})}),
                          test::ContainsText("relative value rows need as many queries as keys, got 4 and 5"));
  CATCH_CHECK_THROWS_WITH(fused_attention(x, x, x, 1.0, {}, {}, {torch::randn({7, 8}), {}, {}, torch::randn({1, 2, 3, 8})}),
                          test::ContainsText("offset query must be shaped like q"));
  // runs: one per offset, from 0 in steps of 0 or 1, the tables one row per run, no clip
  const auto runs = torch::tensor({0, 0, 1, 2, 2, 2, 3}, torch::kInt64);  // 4 runs of the 7 offsets
  auto with_runs = [&](const torch::Tensor& table, const torch::Tensor& r, int64_t clip = 0) {
    return fused_attention(x, x, x, 1.0, {}, {}, {table, {}, {}, {}, {}, clip, r});
  };
  CATCH_CHECK(with_runs(torch::randn({4, 8}), runs).sizes() == x.sizes());
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({7, 8}), runs),
                          test::ContainsText("query rows must be (runs[-1] + 1, Dh) = (4, 8)"));
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({4, 8}), runs.slice(0, 1)),
                          test::ContainsText("runs must be (2T - 1) = (7) integers, got [6]"));
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({4, 8}), runs.to(torch::kFloat32)),
                          test::ContainsText("runs must be (2T - 1) = (7) integers"));
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({5, 8}), torch::tensor({0, 0, 1, 3, 3, 3, 4}, torch::kInt64)),
                          test::ContainsText("runs must start at 0 and step by 0 or 1"));
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({4, 8}), runs + 1),
                          test::ContainsText("runs must start at 0 and step by 0 or 1"));
  CATCH_CHECK_THROWS_WITH(with_runs(torch::randn({5, 8}), runs, 2),
                          test::ContainsText("runs do not combine with clip"));
}

namespace {
// A scheme whose fast-path rows break the rules of relative_rows.h: a query table one row short.
struct ShortRowsImpl : PositionEncodingImpl {
  using PositionEncodingImpl::PositionEncodingImpl;
  bool value_term_ = false;
  RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext&) override {
    RelativeRows rows;
    rows.query = torch::zeros({2 * q.size(2) - 2, q.size(3)});  // (2T - 2, Dh): one row short
    return rows;
  }
  bool has_value_term() const override { return value_term_; }
};
}  // namespace

CATCH_TEST_CASE("a scheme's relative rows are checked where they are built, naming the scheme", "[encoder]") {
  EncodingContext context{32, 4, 2, false, "short_rows"};
  ShortRowsImpl scheme(context);
  const auto q = torch::randn({1, 4, 5, 8});
  const auto positions = contiguous_positions(1, 5);
  const auto weight = torch::zeros({96, 32}), bias = torch::zeros({96});
  const AttentionContext at{positions, 0, weight, bias};
  CATCH_CHECK_THROWS_WITH(scheme.checked_relative_rows(q, q, at),
                          test::ContainsText("short_rows: relative_rows: query rows must be (2T - 1, Dh) = (9, 8)"));
  scheme.value_term_ = true;
  CATCH_CHECK_THROWS_WITH(
      scheme.checked_relative_rows(q, q, at),
      test::ContainsText("short_rows: relative_rows: a scheme with a value term must return value rows"));
  // the registry names each scheme it builds
  const auto shaw_options = OptionValues::defaults(find_entry(scheme_registry(), "shaw", "scheme").info.options);
  auto shaw = make_position_encoding("shaw", EncodingContext{32, 4, 2, false}, shaw_options);
  CATCH_CHECK(shaw->context().scheme == "shaw");
  CATCH_CHECK(shaw->checked_relative_rows(q, q, at).value.defined());
}

namespace {
// softmax(q k^T s + q . Rq[i - j] s + bias + mask) with dropout's multipliers, times
// (v + Rv[i - j]), by plain LibTorch operations; query_rows and value_rows (ascending
// offsets, clipped at clip) may be undefined.
torch::Tensor reference_dropped_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          double scale, const torch::Tensor& bias, const AttentionMask& mask,
                                          const torch::Tensor& query_rows, const torch::Tensor& value_rows, int64_t clip,
                                          const kernels::AttentionDropout& dropout) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3);
  auto i = torch::arange(T);
  auto index = (i.view({T, 1}) - i.view({1, T})).clamp(-clip, clip) + clip;  // (T, T)
  auto embeddings = [&](const torch::Tensor& t) { return t.index_select(0, index.reshape(-1)).view({1, 1, T, T, Dh}); };
  auto scores = torch::matmul(q, k.transpose(-2, -1));
  if (query_rows.defined()) scores = scores + (q.unsqueeze(3) * embeddings(query_rows)).sum(-1);
  scores = scores * scale;
  if (bias.defined()) scores = scores + bias;
  if (mask.any()) scores = scores + mask.additive();
  auto attended = torch::softmax(scores, -1) * attention_dropout_multipliers(B, H, T, T, dropout);
  auto out = torch::matmul(attended, v);
  if (value_rows.defined()) out = out + (attended.unsqueeze(-1) * embeddings(value_rows)).sum(3);
  return out;
}
}  // namespace

CATCH_TEST_CASE("fused_attention with dropout equals the reference with the same decisions, values and gradients",
                "[encoder][dropout]") {
  // the decisions injected through the key: the reference multiplies its probabilities by
  // attention_dropout_multipliers of the same key; biases, padding and causal masks, several
  // query blocks (150), padded probability rows (128), narrow (8) and wide head sizes, and a
  // relative scheme's query and value rows (Shaw's clipped tables: the attended
  // probabilities in the value rows' gradient)
  struct Case {
    int64_t B, H, T, Dh;
    bool bias, causal, padding, relative;
  };
  const std::vector<Case> cases = {{2, 3, 7, 8, false, false, false, false},  {2, 2, 21, 12, true, false, true, false},
                                   {1, 2, 150, 8, true, true, true, false},   {2, 2, 128, 32, false, false, true, false},
                                   {2, 3, 40, 8, false, true, false, true},   {1, 2, 97, 16, true, false, true, true}};
  for_each_kernel_copy_and_thread_count([&](const std::string& isa, int threads) {
    for (size_t n = 0; n < cases.size(); ++n) {
      const auto& c = cases[n];
      CATCH_CAPTURE(isa, threads, c.B, c.H, c.T, c.Dh, c.bias, c.causal, c.padding, c.relative);
      torch::manual_seed(c.T);
      auto q = torch::randn({c.B, c.H, c.T, c.Dh}).requires_grad_(), k = torch::randn({c.B, c.H, c.T, c.Dh}).requires_grad_(),
           v = torch::randn({c.B, c.H, c.T, c.Dh}).requires_grad_();
      torch::Tensor bias, query_rows, value_rows;
      if (c.bias) bias = torch::randn({1, c.H, c.T, c.T}).requires_grad_();
      const int64_t clip = 3;
      if (c.relative) {
        query_rows = torch::randn({2 * clip + 1, c.Dh}).requires_grad_();
        value_rows = torch::randn({2 * clip + 1, c.Dh}).requires_grad_();
      }
      auto padding = torch::zeros({c.B, c.T}, torch::kBool);
      if (c.padding) padding.index_put_({0, torch::indexing::Slice(c.T - 2)}, true);
      const AttentionMask mask(padding, c.causal);
      const double scale = 1.0 / std::sqrt(double(c.Dh));
      const auto dropout = kernels::attention_dropout(0.3, 1000 + n);
      RelativeRows rows;
      if (c.relative) rows = RelativeRows{query_rows, {}, value_rows, {}, {}, clip, {}};
      auto out = fused_attention(q, k, v, scale, bias, mask, rows, dropout);
      auto expected = reference_dropped_attention(q, k, v, scale, bias, mask, query_rows, value_rows, clip, dropout);
      CATCH_CHECK(torch::allclose(out, expected, 1e-5, 4e-6));
      // dropout changed the output: the same call without it differs
      CATCH_CHECK(!torch::allclose(out, fused_attention(q, k, v, scale, bias, mask, rows), 1e-3, 1e-3));
      std::vector<torch::Tensor> inputs = {q, k, v};
      for (const auto& t : {bias, query_rows, value_rows})
        if (t.defined()) inputs.push_back(t);
      check_same_gradients(out, expected, inputs);
      // packed q, k, v take the same decisions
      if (!c.relative) {
        auto packed = torch::stack({q, k, v}).permute({1, 3, 0, 2, 4}).reshape({c.B, c.T, 3 * c.H * c.Dh}).detach();
        auto packed_out = fused_attention_packed(packed, c.H, scale, bias.defined() ? bias.detach() : bias, mask, {},
                                                 dropout);
        CATCH_CHECK(torch::allclose(packed_out, out.detach(), 1e-6, 1e-7));
      }
    }
  });
}

CATCH_TEST_CASE("attention dropout's decisions: rate p within a binomial bound, independent, taken by the kernel",
                "[encoder][dropout]") {
  const int64_t B = 4, H = 8, T = 256, cells = B * H * T * T;  // 2.1M decisions
  for (double p : {0.1, 0.5, 0.9}) {
    CATCH_CAPTURE(p);
    const auto dropout = kernels::attention_dropout(p, 77);
    CATCH_CHECK(dropout.keep_scale == Approx(1.0 / (1.0 - p)));
    const auto dropped = (attention_dropout_multipliers(B, H, T, T, dropout) == 0).to(torch::kFloat64);
    // the rate, and both of two neighbours (along a row, down a column) dropped: p and p^2,
    // each within 5 standard deviations of a binomial count
    auto within = [&](const torch::Tensor& both, double rate) {
      const double sd = std::sqrt(rate * (1 - rate) / both.numel());
      CATCH_CHECK(std::abs(both.mean().item<double>() - rate) < 5 * sd);
    };
    within(dropped, p);
    within(dropped.slice(-1, 1) * dropped.slice(-1, 0, -1), p * p);
    within(dropped.slice(-2, 1) * dropped.slice(-2, 0, -1), p * p);
    // another key, other decisions (agreeing at p^2 + (1 - p)^2 of the cells)
    const auto other = (attention_dropout_multipliers(B, H, T, T, kernels::attention_dropout(p, 78)) == 0)
                           .to(torch::kFloat64);
    within((dropped == other).to(torch::kFloat64), p * p + (1 - p) * (1 - p));
  }
  CATCH_CHECK(cells == 2097152);
  // p = 0: nothing is dropped and the kernel is today's, to the bit
  const auto none = kernels::attention_dropout(0.0, 77);
  CATCH_CHECK(!none.active());
  CATCH_CHECK(torch::all(attention_dropout_multipliers(2, 2, 5, 5, none) == 1).item<bool>());
  auto x = torch::randn({2, 3, 33, 8});
  CATCH_CHECK(torch::equal(fused_attention(x, x, x, 0.3, {}, {}, {}, none), fused_attention(x, x, x, 0.3, {}, {})));
  // the kernel drops exactly the multipliers' zeros: q = k = 0 gives P = 1 / T, and v = I
  // reads the attended row back, 1 / (T (1 - p)) where kept and 0 where dropped
  const int64_t t = 40;
  const auto dropout = kernels::attention_dropout(0.25, 5);
  const auto zeros = torch::zeros({2, 3, t, t}), identity = torch::eye(t).expand({2, 3, t, t}).contiguous();
  for_each_kernel_copy_and_thread_count([&](const std::string& isa, int threads) {
    CATCH_CAPTURE(isa, threads);
    const auto out = fused_attention(zeros, zeros, identity, 1.0, {}, {}, {}, dropout);
    CATCH_CHECK(torch::allclose(out * t, attention_dropout_multipliers(2, 3, t, t, dropout), 1e-6, 1e-6));
  });
}

CATCH_TEST_CASE("attention dropout: fused and unfused paths drop alike for every scheme, and eval mode never drops",
                "[encoder][dropout]") {
  Batch b = batch();
  auto task = test::default_task("reverse_string");
  for (const auto& mode : test::in_each_mode(variants_for_path_tests())) {
    CATCH_CAPTURE(mode.label());
    auto config = test::tiny_config_in_mode(mode.causal);
    config.model.attention_dropout = 0.3;
    Encoder model = test::model_for(config, mode.variant, *task);
    // eval mode: no key drawn (the generator untouched), the logits of the model without dropout
    torch::manual_seed(5);
    const auto before = at::detail::getDefaultCPUGenerator().get_state();
    const auto eval_logits = logits_and_gradients(model, b, false)[0];
    CATCH_CHECK(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), before));
    auto without = test::model_for(test::tiny_config_in_mode(mode.causal), mode.variant, *task);
    CATCH_CHECK(torch::equal(logits_and_gradients(without, b, false)[0], eval_logits));
    // training mode: the same generator state gives the same keys on either path (attention
    // maps asked for: the unfused one), and the fused one ran where the scheme has it
    model->train();
    torch::manual_seed(5);
    const int64_t fused_before = fused_attention_forward_count();
    const auto fused = logits_and_gradients(model, b, false);
    const int64_t fused_calls = fused_attention_forward_count() - fused_before;
    torch::manual_seed(5);
    const auto unfused = logits_and_gradients(model, b, true);
    CATCH_CHECK(fused_attention_forward_count() - fused_before == fused_calls);  // maps: never fused
    check_same_logits_and_gradients(fused, unfused);
    CATCH_CHECK(!torch::allclose(fused[0], eval_logits, 1e-3, 1e-3));  // it dropped something
    if (mode.variant.scheme == "none" || mode.variant.scheme == "alibi" || mode.variant.scheme == "rope")
      CATCH_CHECK(fused_calls == config.model.num_layers);
  }
}
