#include "tests/catch.h"

#include <set>

#include <limits>
#include <map>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/model/run_generator.h"
#include "core/run/run.h"
#include "core/train/adam.h"
#include "core/train/checkpoint.h"
#include "core/train/cuda_graph_step.h"
#include "core/train/metrics.h"
#include "core/train/progress.h"
#include "core/train/schedule.h"
#include "core/train/trainer.h"
#include "tests/support.h"

using namespace pelab;

CATCH_TEST_CASE("learning-rate schedule: linear warm-up, then constant or cosine", "[trainer]") {
  TrainConfig t;
  t.steps = 110;
  t.learning_rate = 1.0;
  t.warmup_steps = 10;
  t.schedule = "constant";
  CATCH_CHECK(learning_rate_at(t, 0) == Approx(0.1));
  CATCH_CHECK(learning_rate_at(t, 4) == Approx(0.5));
  CATCH_CHECK(learning_rate_at(t, 9) == Approx(1.0));
  CATCH_CHECK(learning_rate_at(t, 50) == Approx(1.0));
  t.schedule = "cosine";
  t.min_learning_rate = 0.1;
  CATCH_CHECK(learning_rate_at(t, 10) == Approx(1.0));
  CATCH_CHECK(learning_rate_at(t, 60) == Approx(0.55));  // halfway: min + (max - min) / 2
  CATCH_CHECK(learning_rate_at(t, 110) == Approx(0.1));
  CATCH_CHECK(learning_rate_at(t, 35) > learning_rate_at(t, 36));
}

CATCH_TEST_CASE("curricula: uniform over the range, fixed, regularly increasing", "[trainer]") {
  TrainConfig t;
  t.min_length = 3;
  t.max_length = 7;
  std::mt19937_64 rng(1);
  std::vector<int64_t> seen(8, 0);
  for (int64_t step = 0; step < 2000; ++step) ++seen[curriculum_length(t, step, rng)];
  for (int64_t length = 3; length <= 7; ++length) CATCH_CHECK(seen[length] == Approx(400).margin(60));
  CATCH_CHECK(seen[2] == 0);
  t.curriculum = "fixed";
  CATCH_CHECK(curriculum_length(t, 0, rng) == 7);
  CATCH_CHECK(curriculum_length(t, 999, rng) == 7);
  t.curriculum = "increasing";
  t.increase_every = 100;
  t.increase_by = 2;
  CATCH_CHECK(curriculum_length(t, 0, rng) == 3);
  CATCH_CHECK(curriculum_length(t, 99, rng) == 3);
  CATCH_CHECK(curriculum_length(t, 100, rng) == 5);
  CATCH_CHECK(curriculum_length(t, 250, rng) == 7);
  CATCH_CHECK(curriculum_length(t, 10000, rng) == 7);  // capped
}

CATCH_TEST_CASE("train.phases: BERT's 90% of steps at 128 tokens and 10% at 512, each with its curriculum",
                "[trainer][phases]") {
  auto config = test::tiny_config({"train.steps=1000", "train.phases=[{share: 0.9, min_length: 64, max_length: 64, "
                                   "curriculum: fixed}, {min_length: 256, max_length: 256, curriculum: fixed}]"});
  const TrainConfig& t = config.train;
  CATCH_REQUIRE(t.phases.size() == 2u);
  CATCH_CHECK(t.phases[0].steps == 900);
  CATCH_CHECK(t.phases[1].steps == 100);  // the last phase: the rest
  CATCH_CHECK((t.min_length == 64 && t.max_length == 256));  // the phases' smallest and largest
  std::mt19937_64 rng(1);
  CATCH_CHECK(curriculum_length(t, 0, rng) == 64);
  CATCH_CHECK(curriculum_length(t, 899, rng) == 64);
  CATCH_CHECK(curriculum_length(t, 900, rng) == 256);
  CATCH_CHECK(curriculum_length(t, 999, rng) == 256);
  CATCH_CHECK((phase_at(t, 899).index == 0 && phase_at(t, 900).index == 1 && phase_at(t, 900).first_step == 900));
  // the resolved config keeps the phases, as step counts
  const auto again = parse_run_config(to_yaml(config), "resolved.yaml", {}, scheme_catalog(), task_catalog());
  CATCH_REQUIRE(again.train.phases.size() == 2u);
  CATCH_CHECK(again.train.phases[1].steps == 100);
  CATCH_CHECK(again.train.phases[1].min_length == 256);
  CATCH_CHECK(config_differences(to_yaml(config), to_yaml(again)).empty());

  // an increasing curriculum counts from its phase's first step; lengths default to train's
  auto increasing = test::tiny_config({"train.steps=30", "train.min_length=2", "train.max_length=6",
                                       "train.phases=[{steps: 10}, {curriculum: increasing, increase_every: 5}]"});
  CATCH_CHECK(curriculum_length(increasing.train, 10, rng) == 2);
  CATCH_CHECK(curriculum_length(increasing.train, 15, rng) == 3);
  CATCH_CHECK(curriculum_length(increasing.train, 29, rng) == 5);
  std::set<int64_t> first_phase;
  for (int64_t step = 0; step < 10; ++step) first_phase.insert(curriculum_length(increasing.train, step, rng));
  CATCH_CHECK(first_phase.size() > 1u);  // uniform in 2-6

  // errors name the phase
  auto fails = [](const std::string& phases, const std::string& message) {
    CATCH_CHECK_THROWS_WITH(test::tiny_config({"train.steps=100", "train.phases=" + phases}),
                            test::ContainsText(message));
  };
  fails("[{share: 0.5}, {share: 0.2}]", "the phases' steps add up to 70, not train.steps = 100");
  fails("[{share: 0.5, steps: 50}, {}]", "train.phases[0].steps: give share or steps, not both");
  fails("[{max_length: 4}, {}]", "train.phases[0].share: every phase but the last needs share");
  fails("[{share: 0.5, min_length: 9, max_length: 4}, {}]", "min_length = 9 is larger than max_length = 4");
  fails("[{share: 0.5, lenght: 4}, {}]", "lenght");
  fails("[]", "train.phases: must list at least one phase");
}

CATCH_TEST_CASE("the progress line names the phase", "[trainer][phases]") {
  auto config = test::tiny_config({"train.steps=4", "train.log_every=1",
                                   "train.phases=[{steps: 2, max_length: 3}, {min_length: 4, max_length: 5}]"});
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  const TrainingCurve curve = trainer.train(log, false);
  CATCH_CHECK_THAT(log.str(), test::ContainsText("step 2/4 | phase 1/2 (lengths 2-3) | loss"));
  CATCH_CHECK_THAT(log.str(), test::ContainsText("step 3/4 | phase 2/2 (lengths 4-5) | loss"));
  CATCH_CHECK(curve.phase == std::vector<int64_t>{0, 0, 1, 1});
}

namespace {
TrainingCurve train_curve(const RunConfig& config) {
  auto task = test::default_task(config.task.name);
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  return trainer.train(log, false);
}
}  // namespace

CATCH_TEST_CASE("the same config and seed give the same loss curve", "[trainer]") {
  set_threads(1);
  for (const char* optimizer : {"adam", "adamw"}) {
    CATCH_INFO(optimizer);
    auto config = test::tiny_config({std::string("train.optimizer=") + optimizer, "encoding.name=sinusoidal",
                                     "train.schedule=cosine", "train.warmup_steps=5", "model.dropout=0.1"});
    auto a = train_curve(config), b = train_curve(config);
    CATCH_REQUIRE(a.loss.size() == 2u);
    CATCH_CHECK(a.loss == b.loss);
    CATCH_CHECK(a.learning_rate == b.learning_rate);
    config.seed = 2;
    CATCH_CHECK(train_curve(config).loss != a.loss);
  }
}

CATCH_TEST_CASE("a parameter that gets no gradient fails the run, named", "[trainer]") {
  auto config = test::tiny_config();
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  model->register_parameter("forgotten_table", torch::zeros({3, 3}));
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  CATCH_CHECK_THROWS_WITH(trainer.train(log, false),
                          test::ContainsText("parameter(s) no backward pass reached in the first 20 steps: "
                                             "forgotten_table."));
}

CATCH_TEST_CASE("a parameter reached with exactly zero gradients warns and is recorded, the run goes on",
                "[trainer]") {
  // A sparse parameter (FIRE's length multiplier under randomized positions got exactly zero
  // gradients in each of its first 20 steps by chance) is not a dead one: the run must not
  // fail over it, whatever train.unused_parameters says.
  auto task = test::default_task("reverse_string");
  for (const char* policy : {"error", "warn"}) {
    CATCH_CAPTURE(policy);
    auto config = test::tiny_config({std::string("train.unused_parameters=") + policy,
                                     "train.unused_parameters_steps=3", "train.steps=6", "train.log_every=3"});
    Encoder model = build_model(config, *task);
    // its gradient replaced by zeros at every step: reached by the forward pass, never moved
    model->named_parameters()["head.bias"].register_hook([](torch::Tensor g) { return torch::zeros_like(g); });
    Trainer trainer(config, model, *task, torch::kCPU);
    std::ostringstream log;
    const auto curve = trainer.train(log, false);
    CATCH_CHECK(curve.step.back() == 6);
    CATCH_CHECK_THAT(log.str(), test::ContainsText("warning: parameter(s) reached by the forward pass whose gradient "
                                                   "was exactly zero at each of the first 3 steps: head.bias"));
    CATCH_CHECK(curve.zero_gradient_parameters == std::vector<std::string>{"head.bias"});
    // kept in checkpoints, so a resumed run records it too
    Trainer resumed(config, build_model(config, *task), *task, torch::kCPU);
    resumed.restore(trainer.checkpoint());
    CATCH_CHECK(resumed.progress().curve.zero_gradient_parameters == std::vector<std::string>{"head.bias"});
  }
  // the same run without the hook trains every parameter
  auto config = test::tiny_config({"train.unused_parameters_steps=3", "train.steps=6"});
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  trainer.train(log, false);
  CATCH_CHECK_THAT(log.str(), !test::ContainsText("warning"));
}

CATCH_TEST_CASE("attention statistics of a batch forwarded in slices equal those of one forward", "[trainer]") {
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config({"encoding.name=alibi", "eval.batch_size=16"});
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  const EvalResult whole = trainer.evaluator().evaluate_length(8, 16);
  trainer.evaluator().set_statistics_probabilities(1);  // one example per forward
  const EvalResult sliced = trainer.evaluator().evaluate_length(8, 16);
  CATCH_CHECK(sliced.loss == Approx(whole.loss).epsilon(1e-6));
  CATCH_CHECK(sliced.per_token_accuracy == whole.per_token_accuracy);
  CATCH_REQUIRE(sliced.attention.entropy.size() == whole.attention.entropy.size());
  CATCH_REQUIRE(!whole.attention.empty());
  for (size_t i = 0; i < whole.attention.entropy.size(); ++i) {
    CATCH_CHECK(sliced.attention.entropy[i] == Approx(whole.attention.entropy[i]).epsilon(1e-6));
    CATCH_CHECK(sliced.attention.mean_distance[i] == Approx(whole.attention.mean_distance[i]).epsilon(1e-6));
    CATCH_CHECK(sliced.attention.last[i] == Approx(whole.attention.last[i]).epsilon(1e-6));
  }
}

CATCH_TEST_CASE("evaluation flags position-table rows that training never updated, naming the scheme",
                "[trainer]") {
  auto task = test::default_task("reverse_string");
  std::ostringstream log;
  // learned: training lengths 2-6 are 4-12 tokens (positions 0-11); length 8 is 16 tokens
  auto learned = test::tiny_config({"encoding.name=learned", "train.steps=30", "train.min_length=6"});
  Encoder model = build_model(learned, *task);
  Trainer trainer(learned, model, *task, torch::kCPU);
  trainer.train(log, false);
  CATCH_CHECK(trainer.evaluator().evaluate_length(6, 16).untrained.empty());
  CATCH_CHECK(trainer.evaluator().evaluate_length(8, 16).untrained == "learned: positions 12..15 never trained");
  CATCH_CHECK(trainer.evaluator().evaluate_length(8, 16, "none", /*statistics=*/false).untrained.empty());  // not checked
  const auto rows = trainer.trained_rows();
  CATCH_REQUIRE(rows.size() == 1u);
  CATCH_CHECK(rows[0].parameter == "position_encoding.table");
  CATCH_CHECK(std::count(rows[0].trained.begin(), rows[0].trained.end(), 1) == 12);
  CATCH_CHECK(std::all_of(rows[0].trained.begin(), rows[0].trained.begin() + 12, [](uint8_t x) { return x == 1; }));

  // t5_bias: 32 buckets, 16 per direction; training offsets up to +-11 reach the first log
  // buckets; lengths 3 and 6 stay within them, length 40 (offsets up to +-79) does not
  auto t5 = test::tiny_config({"encoding.name=t5_bias", "train.steps=30", "train.min_length=6"});
  Encoder t5_model = build_model(t5, *task);
  Trainer t5_trainer(t5, t5_model, *task, torch::kCPU);
  t5_trainer.train(log, false);
  CATCH_CHECK(t5_trainer.evaluator().evaluate_length(3, 16).untrained.empty());
  CATCH_CHECK(t5_trainer.evaluator().evaluate_length(6, 16).untrained.empty());
  CATCH_CHECK_THAT(t5_trainer.evaluator().evaluate_length(40, 16).untrained, test::ContainsText("t5_bias: buckets "));

  // offset tables: at the training length every offset a scored prediction uses was trained
  // (the input half's own offsets reach only unscored outputs in the last layer), beyond it not
  for (const char* scheme : {"relative_key", "shaw"}) {
    CATCH_CAPTURE(scheme);
    auto relative = test::tiny_config({std::string("encoding.name=") + scheme, "train.steps=30", "train.min_length=6"});
    Encoder relative_model = build_model(relative, *task);
    Trainer relative_trainer(relative, relative_model, *task, torch::kCPU);
    relative_trainer.train(log, false);
    CATCH_CHECK(relative_trainer.evaluator().evaluate_length(6, 16).untrained.empty());
    CATCH_CHECK(relative_trainer.evaluator().evaluate_length(3, 16).untrained.empty());
    CATCH_CHECK_THAT(relative_trainer.evaluator().evaluate_length(9, 16).untrained,
                     test::ContainsText(std::string(scheme) + ": offsets "));
  }

  // a scheme without tables never flags
  auto alibi = test::tiny_config({"encoding.name=alibi", "train.steps=5"});
  Encoder alibi_model = build_model(alibi, *task);
  Trainer alibi_trainer(alibi, alibi_model, *task, torch::kCPU);
  alibi_trainer.train(log, false);
  CATCH_CHECK(alibi_trainer.trained_rows().empty());
  CATCH_CHECK(alibi_trainer.evaluator().evaluate_length(40, 16).untrained.empty());
}

CATCH_TEST_CASE("the multi-tensor Adam and AdamW steps equal torch::optim's bit for bit, and so does clipping",
                "[trainer]") {
  for (const char* name : {"adam", "adamw"})
    for (double weight_decay : {0.0, 0.1}) {
      CATCH_CAPTURE(name, weight_decay);
      TrainConfig t;
      t.optimizer = name;
      t.weight_decay = weight_decay;
      t.beta2 = 0.98;
      torch::manual_seed(3);
      std::vector<torch::Tensor> ours = {torch::randn({5, 3}), torch::randn({7}), torch::randn({2, 2, 2})};
      std::vector<torch::Tensor> theirs;
      for (auto& p : ours) {
        p.requires_grad_();
        theirs.push_back(p.detach().clone().requires_grad_());
      }
      std::unique_ptr<torch::optim::Optimizer> reference;
      if (t.optimizer == "adamw")
        reference = std::make_unique<torch::optim::AdamW>(
            theirs, torch::optim::AdamWOptions(1e-3).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(weight_decay));
      else
        reference = std::make_unique<torch::optim::Adam>(
            theirs, torch::optim::AdamOptions(1e-3).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(weight_decay));
      AdamStep adam(ours, t);
      for (int step = 0; step < 12; ++step) {
        const double lr = 1e-2 * (step + 1) / 10;
        for (size_t i = 0; i < ours.size(); ++i) {
          // parameter 1 has no gradient at step 4: both skip it (its step count lags)
          const auto g = step == 4 && i == 1 ? torch::Tensor() : torch::randn(ours[i].sizes());
          ours[i].mutable_grad() = g.defined() ? g.clone() : g;
          theirs[i].mutable_grad() = g.defined() ? g.clone() : g;
        }
        for (auto& group : reference->param_groups()) group.options().set_lr(lr);
        adam.step(lr);
        reference->step();
        for (size_t i = 0; i < ours.size(); ++i) CATCH_CHECK(torch::equal(ours[i], theirs[i]));
      }
    }
  std::vector<torch::Tensor> a = {torch::randn({4, 4}).requires_grad_(), torch::randn({3}).requires_grad_()};
  std::vector<torch::Tensor> b = {a[0].detach().clone().requires_grad_(), a[1].detach().clone().requires_grad_()};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].mutable_grad() = torch::randn(a[i].sizes()) * 3;
    b[i].mutable_grad() = a[i].grad().clone();
  }
  const double norm = clip_gradients(a, 0.5).item<double>();
  CATCH_CHECK(norm == torch::nn::utils::clip_grad_norm_(b, 0.5));
  CATCH_CHECK(norm > 0.5);
  for (size_t i = 0; i < a.size(); ++i) CATCH_CHECK(torch::equal(a[i].grad(), b[i].grad()));
}

CATCH_TEST_CASE("Adam with its per-step numbers read from a tensor (a CUDA graph's step) equals step()",
                "[trainer][cuda_graphs]") {
  for (const char* name : {"adam", "adamw"}) {
    CATCH_CAPTURE(name);
    TrainConfig t;
    t.optimizer = name;
    t.weight_decay = 0.1;
    torch::manual_seed(4);
    std::vector<torch::Tensor> ours = {torch::randn({5, 3}), torch::randn({7})}, theirs;
    for (auto& p : ours) theirs.push_back(p.clone());
    AdamStep direct(theirs, t), with_tensor(ours, t);
    CATCH_CHECK(with_tensor.uniform_steps());
    for (int step = 0; step < 6; ++step) {
      const double lr = 1e-2 * (step + 1);
      for (size_t i = 0; i < ours.size(); ++i) {
        ours[i].mutable_grad() = torch::randn(ours[i].sizes());
        theirs[i].mutable_grad() = ours[i].grad().clone();
      }
      const auto scalars = with_tensor.next_step_scalars(lr);
      // [1 - lr wd, -lr / (1 - beta1^t), sqrt(1 - beta2^t)] at t = step + 1
      CATCH_CHECK(scalars[0].item<double>() == Approx(1 - lr * 0.1).epsilon(1e-6));
      CATCH_CHECK(scalars[1].item<double>() == Approx(-lr / (1 - std::pow(t.beta1, step + 1))).epsilon(1e-6));
      CATCH_CHECK(scalars[2].item<double>() == Approx(std::sqrt(1 - std::pow(t.beta2, step + 1))).epsilon(1e-6));
      direct.step(lr);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
      with_tensor.step_with(scalars);
      with_tensor.advance_steps();
      for (size_t i = 0; i < ours.size(); ++i) CATCH_CHECK(torch::allclose(ours[i], theirs[i], 1e-6, 1e-7));
#else
      CATCH_CHECK_THROWS_WITH(with_tensor.step_with(scalars), test::ContainsText("LibTorch 2.1"));
      return;
#endif
    }
    // a step count that differs between parameters (a parameter skipped once) rules graphs out
    theirs[1].mutable_grad() = torch::Tensor();
    theirs[0].mutable_grad() = torch::randn(theirs[0].sizes());
    direct.step(1e-3);
    CATCH_CHECK_FALSE(direct.uniform_steps());
  }
}

CATCH_TEST_CASE("the loss over scored tokens: selecting them or ignoring the others agree", "[trainer][cuda_graphs]") {
  torch::manual_seed(5);
  Batch batch;
  batch.tokens = torch::ones({3, 6}, torch::kInt64);
  batch.targets = torch::randint(0, 4, {3, 6}, torch::kInt64);
  batch.scored = torch::rand({3, 6}) < 0.5;
  batch.scored[0][0] = true;
  const auto logits = torch::randn({3, 6, 4});
  const auto selected = scored_cross_entropy(logits, batch, /*select_scored=*/true);
  const auto ignored = scored_cross_entropy(logits, batch, /*select_scored=*/false);
  // the mean by hand: -log softmax at the target, over the scored tokens
  const auto per_token = -torch::log_softmax(logits, -1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1);
  const double expected = (per_token * batch.scored).sum().item<double>() / batch.scored.sum().item<double>();
  CATCH_CHECK(selected.item<double>() == Approx(expected).epsilon(1e-6));
  CATCH_CHECK(ignored.item<double>() == Approx(expected).epsilon(1e-6));
}

CATCH_TEST_CASE("a CUDA graph's static inputs keep shared rows and aliases, and refuse other shapes",
                "[trainer][cuda_graphs]") {
  const auto row = torch::arange(4, torch::kInt64);
  const auto shared = row.unsqueeze(0).expand({3, 4});  // positions: one row for the batch
  const auto tokens = torch::randint(0, 5, {3, 4}, torch::kInt64);
  StaticInputs inputs({tokens, torch::Tensor(), shared, shared});
  const auto& t = inputs.tensors();
  CATCH_REQUIRE(t.size() == 4);
  CATCH_CHECK(torch::equal(t[0], tokens));
  CATCH_CHECK_FALSE(t[0].is_same(tokens));  // a copy, filled again before every replay
  CATCH_CHECK_FALSE(t[1].defined());
  CATCH_CHECK(t[2].stride(0) == 0);  // still one row: collapse_broadcast_rows finds it
  CATCH_CHECK(t[3].is_same(t[2]));   // query and key stay one tensor
  const auto data = t[0].data_ptr();
  const auto shifted = (row + 7).unsqueeze(0).expand({3, 4});
  const auto other = torch::randint(0, 5, {3, 4}, torch::kInt64);
  inputs.fill({other, torch::Tensor(), shifted, shifted});
  CATCH_CHECK(t[0].data_ptr() == data);  // the same memory, new values
  CATCH_CHECK(torch::equal(t[0], other));
  CATCH_CHECK(torch::equal(t[3], shifted));
  CATCH_CHECK_THROWS_WITH(inputs.fill({torch::zeros({3, 5}, torch::kInt64), torch::Tensor(), shifted, shifted}),
                          test::ContainsText("input 0 differs in shape"));
}

CATCH_TEST_CASE("train.cuda_graphs: on needs a GPU, auto runs without one", "[trainer][cuda_graphs]") {
  RunConfig config = test::tiny_config();
  config.train.cuda_graphs = "on";
  const auto task = test::default_task("reverse_string");
  CATCH_CHECK_THROWS_WITH(Trainer(config, build_model(config, *task), *task, torch::kCPU),
                          test::ContainsText("train.cuda_graphs: on needs a CUDA device"));
  config.train.cuda_graphs = "auto";
  config.train.steps = 3;
  Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
  std::ostringstream log;
  trainer.train(log, false);
  CATCH_CHECK(log.str().find("cuda graphs") == std::string::npos);
}

CATCH_TEST_CASE("reading the loss back every N steps changes nothing, and a NaN still stops the run at its step",
                "[trainer]") {
  auto task = test::default_task("reverse_string");
  std::ostringstream log;
  struct Finished {
    TrainingCurve curve;
    std::vector<torch::Tensor> parameters;
  };
  auto train_with = [&](int64_t sync_every) {
    auto config = test::tiny_config({"train.steps=23", "train.log_every=5", "model.dropout=0.1",
                                     "train.sync_every=" + std::to_string(sync_every)});
    Encoder model = build_model(config, *task);
    Trainer trainer(config, model, *task, torch::kCPU);
    Finished out{trainer.train(log, false), {}};
    for (const auto& p : model->parameters()) out.parameters.push_back(p.detach().clone());
    return out;
  };
  const Finished every_step = train_with(1);
  CATCH_REQUIRE(every_step.curve.step == std::vector<int64_t>{5, 10, 15, 20, 23});
  for (int64_t sync_every : {4, 7, 100}) {
    CATCH_CAPTURE(sync_every);
    const Finished deferred = train_with(sync_every);
    CATCH_CHECK(deferred.curve.step == every_step.curve.step);
    CATCH_CHECK(deferred.curve.loss == every_step.curve.loss);  // bit for bit
    CATCH_CHECK(deferred.curve.accuracy == every_step.curve.accuracy);
    for (size_t i = 0; i < every_step.parameters.size(); ++i)
      CATCH_CHECK(torch::equal(deferred.parameters[i], every_step.parameters[i]));
  }
  // a NaN gradient at step 6, read back at step 8: the run stops naming step 6
  auto config = test::tiny_config({"train.grad_clip=0", "train.sync_every=4"});
  Encoder model = build_model(config, *task);
  auto calls = std::make_shared<int>(0);
  model->named_parameters()["head.weight"].register_hook([calls](const torch::Tensor& g) {
    return ++*calls == 6 ? g * std::numeric_limits<float>::quiet_NaN() : g;
  });
  Trainer trainer(config, model, *task, torch::kCPU);
  CATCH_CHECK_THROWS_WITH(trainer.train(log, false),
                          test::ContainsText("non-finite gradient at step 6 (length ") &&
                              test::ContainsText("gradient norm = nan") && test::ContainsText("found at step 8"));
}

CATCH_TEST_CASE("the padding row of the token embedding is zero and stays zero", "[trainer][encoder]") {
  auto config = test::tiny_config({"train.optimizer=adamw", "train.weight_decay=0.1", "train.steps=10"});
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  auto table = model->named_parameters()["token_embedding.weight"];
  CATCH_CHECK(table[kPadToken].abs().sum().item<float>() == 0.0f);
  Trainer trainer(config, model, *task, torch::kCPU);
  std::ostringstream log;
  trainer.train(log, false);
  CATCH_CHECK(table[kPadToken].abs().sum().item<float>() == 0.0f);
  CATCH_CHECK(table[2].abs().sum().item<float>() > 0.0f);
}

CATCH_TEST_CASE("evaluation reports per-token and per-sequence accuracy per length", "[trainer]") {
  auto config = test::tiny_config({"eval.lengths=[2, 9]", "eval.samples=40", "eval.batch_size=16"});
  auto task = test::default_task("reverse_string");
  Trainer trainer(config, build_model(config, *task), *task, torch::kCPU);
  auto results = trainer.evaluator().evaluate();
  CATCH_REQUIRE(results.size() == 2u);
  CATCH_CHECK(results[0].length == 2);
  CATCH_CHECK(results[1].sequence_length == 18);
  CATCH_CHECK(results[1].samples == 40);
  for (const auto& r : results) {
    CATCH_CHECK((r.per_token_accuracy >= 0.0 && r.per_token_accuracy <= 1.0));
    CATCH_CHECK(r.per_sequence_accuracy <= r.per_token_accuracy);
  }
  // the evaluation set is fixed by the seed: evaluating twice gives the same numbers
  auto again = trainer.evaluator().evaluate();
  CATCH_CHECK(again[1].per_token_accuracy == results[1].per_token_accuracy);
}

CATCH_TEST_CASE("progress prints plain lines when not on a terminal", "[trainer]") {
  std::ostringstream out;
  ProgressReporter progress(out, 10, 5, false);
  for (int64_t step = 1; step <= 10; ++step) progress.update({step, 0.5, 0.75, 1234, 1e-3});
  progress.finish();
  const std::string text = out.str();
  CATCH_CHECK(text.find('\r') == std::string::npos);
  CATCH_CHECK(std::count(text.begin(), text.end(), '\n') == 3);  // steps 1, 5, 10
  CATCH_CHECK_THAT(text, test::ContainsText("step 10/10 | loss 0.5000 | acc  75.00%") &&
                             test::ContainsText("1234 tok/s"));
}

CATCH_TEST_CASE("a sweep's time left counts the processes running side by side", "[trainer]") {
  // 30 runs of 60 s, 2 at a time: when the first two end, 28 remain, 14 minutes, not 29 runs'
  // worth (the elapsed time per finished run, which ignored the parallel slots)
  CATCH_CHECK(sweep_seconds_left(60, 28, {}, 2) == Approx(14 * 60));
  // one ended at 60 s, its twin has run 60 s too (about to end), 28 to start
  CATCH_CHECK(sweep_seconds_left(60, 28, {60}, 2) == Approx(14 * 60));
  // the last one running, halfway: its rest, whatever the slots
  CATCH_CHECK(sweep_seconds_left(60, 0, {30}, 4) == Approx(30));
  // more slots than processes left: each runs in its own slot, so the longest rest bounds it
  CATCH_CHECK(sweep_seconds_left(60, 1, {10}, 8) == Approx(60));
  // a process running past the mean adds nothing
  CATCH_CHECK(sweep_seconds_left(60, 0, {90}, 2) == Approx(0));
}

CATCH_TEST_CASE("a non-finite loss stops the run, naming the step, nonfinite: skip skips and counts", "[trainer]") {
  auto task = test::default_task("reverse_string");
  std::ostringstream log;
  // a finite loss whose backward gives one parameter a NaN gradient: the global gradient
  // norm (without clipping, which would spread the NaN to every gradient) is NaN, and the
  // message names the parameter
  auto nan_gradients = [&](const RunConfig& config) {
    Encoder model = build_model(config, *task);
    model->named_parameters()["head.weight"].register_hook(
        [](const torch::Tensor& g) { return g * std::numeric_limits<float>::quiet_NaN(); });
    return model;
  };
  auto unclipped = test::tiny_config({"train.grad_clip=0"});
  Trainer nan_gradient(unclipped, nan_gradients(unclipped), *task, torch::kCPU);
  CATCH_CHECK_THROWS_WITH(nan_gradient.train(log, false),
                          test::ContainsText("non-finite gradient at step 1") &&
                              test::ContainsText("gradient norm = nan") &&
                              test::ContainsText("not finite in: head.weight; lower train.learning_rate, enable "
                                                 "train.grad_clip, or set train.nonfinite: skip"));
  // skip: no update, the parameters untouched, every step counted
  auto skip = test::tiny_config({"train.grad_clip=0", "train.nonfinite=skip"});
  Encoder model = nan_gradients(skip);
  auto before = model->named_parameters()["blocks.0.attention.qkv.weight"].clone();
  Trainer skipping(skip, model, *task, torch::kCPU);
  TrainingCurve curve = skipping.train(log, false);
  CATCH_CHECK(curve.skipped_steps == skip.train.steps);
  CATCH_CHECK(torch::equal(model->named_parameters()["blocks.0.attention.qkv.weight"], before));  // untouched
  CATCH_CHECK_THAT(log.str(), test::ContainsText("skipped 20 of 20 steps"));

  // non-finite parameters (here a NaN in the output head before training): every loss is
  // NaN, which no skipped step can undo, so skip stops too, naming them
  for (const char* mode : {"stop", "skip"}) {
    CATCH_INFO(mode);
    auto config = test::tiny_config({std::string("train.nonfinite=") + mode});
    Encoder poisoned = build_model(config, *task);
    {
      torch::NoGradGuard no_grad;
      poisoned->named_parameters()["head.bias"].fill_(std::numeric_limits<float>::quiet_NaN());
    }
    Trainer trainer(config, poisoned, *task, torch::kCPU);
    CATCH_CHECK_THROWS_WITH(trainer.train(log, false),
                            test::ContainsText("non-finite loss at step 1") && test::ContainsText("loss = nan") &&
                                test::ContainsText("the parameters are not finite (head.bias) before training, "
                                                   "which no skipped step can undo"));
  }
  // an update that makes them non-finite (Adam with eps 0: 0 / 0 where a gradient is 0; the
  // head's bias gets an exactly zero one, as LibTorch 2.x leaves no other exact zero here)
  auto no_eps = test::tiny_config({"train.eps=0", "train.nonfinite=skip"});
  Encoder zero_gradient = build_model(no_eps, *task);
  zero_gradient->named_parameters()["head.bias"].register_hook([](const torch::Tensor& g) { return g * 0; });
  Trainer broken(no_eps, zero_gradient, *task, torch::kCPU);
  CATCH_CHECK_THROWS_WITH(broken.train(log, false),
                          test::ContainsText("non-finite loss at step 2") &&
                              test::ContainsText("since the update of step 1, which no skipped step can undo; lower "
                                                 "train.learning_rate or raise train.eps"));
}

namespace {

// A run that draws from every stream a checkpoint must restore: dropout (LibTorch's
// generator), randomized positions (the position stream), a uniform curriculum (the data
// stream), AdamW with warm-up and a cosine schedule, and a log window cut by the stop.
// phased: train.phases of 10 steps at lengths 1-4, then 10 increasing from 5 to 8
RunConfig resumable_config(bool phased = false) {
  std::vector<std::string> overrides = {
      "model.dropout=0.1", "model.attention_dropout=0.1", "positions.sampler=randomized", "positions.max_length=32",
      "train.optimizer=adamw", "train.weight_decay=0.01", "train.warmup_steps=4", "train.schedule=cosine",
      "train.log_every=3", "train.steps=20", "encoding.name=learned", "eval.every=4", "eval.every_samples=8",
      "eval.every_lengths=[3, 9]", "output.keep_checkpoints=[5, 16]"};
  if (phased)
    overrides.push_back("train.phases=[{share: 0.5, min_length: 1, max_length: 4}, "
                        "{min_length: 5, max_length: 8, curriculum: increasing, increase_every: 3}]");
  return test::tiny_config(overrides);
}

struct FinishedTraining {
  TrainingCurve curve;
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
  TrainerProgress progress;                 // its evaluation curve and snapshots
  std::vector<TrainedRows> trained_rows;
};

FinishedTraining parameters_after(Encoder& model, const Trainer& trainer, TrainingCurve curve) {
  FinishedTraining out{std::move(curve), {}, trainer.progress(), trainer.trained_rows()};
  for (const auto& p : model->named_parameters()) out.parameters.emplace_back(p.key(), p.value().detach().clone());
  return out;
}

// The run that never stops: its curve and final parameters.
FinishedTraining uninterrupted(const RunConfig& config, const Task& task) {
  std::ostringstream log;
  Encoder model = build_model(config, task);
  Trainer trainer(config, model, task, torch::kCPU);
  TrainingCurve curve = trainer.train(log, false);
  return parameters_after(model, trainer, std::move(curve));
}

// A trainer of resumable_config() on reverse_string, before its first step, and a
// checkpoint path in a temporary directory (members refer to each other: not copied).
struct CheckpointSetup {
  const RunConfig config = resumable_config();
  const std::unique_ptr<Task> task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  Trainer trainer{config, model, *task, torch::kCPU};
  test::TemporaryDirectory dir;
  const std::string file = dir.path + "/checkpoint.h5";
};

}  // namespace

CATCH_TEST_CASE("a run stopped at any step and resumed from its checkpoint file equals one that never stopped",
                "[trainer][resume]") {
  for (const bool phased : {false, true}) {  // phased: stops within either phase of train.phases
  CATCH_CAPTURE(phased);
  const RunConfig config = resumable_config(phased);
  auto task = test::default_task("reverse_string");
  std::ostringstream log;
  const FinishedTraining expected = uninterrupted(config, *task);
  CATCH_REQUIRE(expected.curve.loss.size() == 7);  // rows at 3, 6, ..., 18 and 20

  test::TemporaryDirectory dir;
  const std::string file = dir.path + "/checkpoint.h5";
  for (int64_t stop_at : {1, 7, 13, 19, 20}) {
    CATCH_CAPTURE(stop_at);
    {
      Encoder model = build_model(config, *task);
      Trainer first(config, model, *task, torch::kCPU);
      first.enable_checkpoints(file, 0);
      first.train_until(stop_at, log, false);
      first.write_checkpoint();
    }
    torch::manual_seed(12345);  // the resumed trainer must not depend on the generator it finds
    Encoder model = build_model(config, *task);
    Trainer resumed(config, model, *task, torch::kCPU);
    resumed.restore(read_training_checkpoint(file));
    CATCH_CHECK(resumed.progress().step == stop_at);
    TrainingCurve curve = resumed.train(log, false);
    const FinishedTraining got = parameters_after(model, resumed, std::move(curve));
    CATCH_CHECK(got.curve.step == expected.curve.step);
    // the evaluation curve (steps 4, 8, ..., 20 x lengths 3, 9), the snapshots and the trained rows
    const auto& rows = got.progress.evaluation_curve;
    CATCH_REQUIRE(rows.size() == expected.progress.evaluation_curve.size());
    CATCH_CHECK(rows.size() == 10u);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& want = expected.progress.evaluation_curve[i];
      CATCH_CHECK(rows[i].step == want.step);
      CATCH_CHECK(rows[i].length == want.length);
      CATCH_CHECK(rows[i].samples == 8);
      CATCH_CHECK(rows[i].per_token_accuracy == want.per_token_accuracy);  // bit for bit
      CATCH_CHECK(rows[i].loss == want.loss);
    }
    CATCH_REQUIRE(got.progress.snapshots.size() == 2u);
    for (size_t s = 0; s < 2; ++s) {
      CATCH_CHECK(got.progress.snapshots[s].first == expected.progress.snapshots[s].first);
      std::map<std::string, torch::Tensor> kept(got.progress.snapshots[s].second.begin(),
                                                got.progress.snapshots[s].second.end());
      CATCH_REQUIRE(kept.size() == expected.progress.snapshots[s].second.size());
      for (const auto& [name, tensor] : expected.progress.snapshots[s].second)
        CATCH_CHECK(torch::equal(kept.at(name), tensor));
    }
    CATCH_REQUIRE(got.trained_rows.size() == 1u);
    CATCH_CHECK(got.trained_rows[0].trained == expected.trained_rows[0].trained);
    CATCH_CHECK(got.curve.loss == expected.curve.loss);  // bit for bit
    CATCH_CHECK(got.curve.accuracy == expected.curve.accuracy);
    CATCH_CHECK(got.curve.learning_rate == expected.curve.learning_rate);
    CATCH_CHECK(got.curve.phase == expected.curve.phase);
    for (size_t i = 0; i < expected.parameters.size(); ++i) {
      CATCH_CAPTURE(expected.parameters[i].first);
      CATCH_CHECK(torch::equal(got.parameters[i].second, expected.parameters[i].second));
    }
  }
  // rows at steps 3, 6, 9 are phase 0; 12, ..., 20 phase 1
  CATCH_CHECK(expected.curve.phase == (phased ? std::vector<int64_t>{0, 0, 0, 1, 1, 1, 1}
                                              : std::vector<int64_t>(7, 0)));
  }
}

CATCH_TEST_CASE("without the optimizer state or the RNG streams a resumed run differs (the test above can fail)",
                "[trainer][resume]") {
  const RunConfig config = resumable_config();
  auto task = test::default_task("reverse_string");
  std::ostringstream log;
  const TrainingCurve expected = uninterrupted(config, *task).curve;

  Encoder model = build_model(config, *task);
  Trainer first(config, model, *task, torch::kCPU);
  first.train_until(10, log, false);
  const TrainingCheckpoint whole = first.checkpoint();
  auto resumed_loss = [&](TrainingCheckpoint checkpoint) {
    Encoder fresh = build_model(config, *task);
    Trainer resumed(config, fresh, *task, torch::kCPU);
    resumed.restore(checkpoint);
    return resumed.train(log, false).loss;
  };
  CATCH_CHECK(resumed_loss(whole) == expected.loss);
  TrainingCheckpoint fresh_optimizer = whole;  // Adam's moments from a new optimizer
  {
    Encoder fresh = build_model(config, *task);
    fresh_optimizer.optimizer = Trainer(config, fresh, *task, torch::kCPU).checkpoint().optimizer;
  }
  CATCH_CHECK(resumed_loss(fresh_optimizer) != expected.loss);
  TrainingCheckpoint fresh_data = whole;  // the data stream from its seed again
  fresh_data.data_rng = Trainer(config, build_model(config, *task), *task, torch::kCPU).checkpoint().data_rng;
  CATCH_CHECK(resumed_loss(fresh_data) != expected.loss);
  TrainingCheckpoint other_dropout = whole;  // LibTorch's generator elsewhere
  torch::manual_seed(99);
  other_dropout.torch_rng = at::detail::getDefaultCPUGenerator().get_state();
  CATCH_CHECK(resumed_loss(other_dropout) != expected.loss);
}

CATCH_TEST_CASE("checkpoint files keep a GPU generator's state when the run has one, and none from the CPU",
                "[trainer][resume]") {
  CheckpointSetup setup;
  TrainingCheckpoint checkpoint = setup.trainer.checkpoint();
  CATCH_CHECK_FALSE(checkpoint.cuda_rng.defined());  // a CPU run
  write_training_checkpoint(setup.file, checkpoint);
  CATCH_CHECK_FALSE(read_training_checkpoint(setup.file).cuda_rng.defined());

  // a stand-in for a CUDA generator's state (its Philox seed and offset: 16 bytes)
  checkpoint.cuda_rng = torch::arange(200, 216, torch::kInt32).to(torch::kUInt8);
  write_training_checkpoint(setup.file, checkpoint);
  const TrainingCheckpoint read = read_training_checkpoint(setup.file);
  CATCH_REQUIRE(read.cuda_rng.defined());
  CATCH_CHECK(torch::equal(read.cuda_rng, checkpoint.cuda_rng));
  CATCH_CHECK(torch::equal(read.torch_rng, checkpoint.torch_rng));
  Trainer resumed_on_cpu(setup.config, build_model(setup.config, *setup.task), *setup.task, torch::kCPU);
  resumed_on_cpu.restore(read);  // the GPU's state is not for the CPU's generator: left aside
  CATCH_CHECK(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), checkpoint.torch_rng));
}

CATCH_TEST_CASE("checkpoint files: a truncated one is refused naming the file, the config is compared key by key",
                "[trainer][resume]") {
  CheckpointSetup setup;
  setup.trainer.enable_checkpoints(setup.file, 0);
  setup.trainer.write_checkpoint();
  CATCH_CHECK_FALSE(std::filesystem::exists(setup.file + ".tmp"));
  std::filesystem::resize_file(setup.file, std::filesystem::file_size(setup.file) / 2);
  CATCH_CHECK_THROWS_WITH(read_training_checkpoint(setup.file),
                          Catch::Matchers::StartsWith("cannot read checkpoint " + setup.file));
  CATCH_CHECK_THROWS_WITH(read_training_checkpoint(setup.file + ".absent"), test::ContainsText("does not exist"));

  RunConfig other = setup.config;
  other.train.learning_rate = 0.002;
  other.threads = 7;         // ignored: not part of the results' definition
  other.name = "renamed";
  const auto differences = config_differences(to_yaml(setup.config), to_yaml(other));
  CATCH_REQUIRE(differences.size() == 1);
  CATCH_CHECK(differences[0] == "train.learning_rate: 0.001 -> 0.002");
}

CATCH_TEST_CASE("a stored config without keys added since counts them as their defaults", "[trainer]") {
  auto config = test::tiny_config();
  std::string stored = to_yaml(config);
  for (const std::string key : {"  embedding_init_std: 1\n", "  embedding_scale: none\n"}) {
    const auto at = stored.find(key);
    CATCH_REQUIRE(at != std::string::npos);
    stored.erase(at, key.size());  // as a run file written before the key existed
  }
  CATCH_CHECK(differences_from_stored("old.h5", stored, config).empty());
  config.model.embedding_scale = "sqrt_d_model";
  const auto differences = differences_from_stored("old.h5", stored, config);
  CATCH_REQUIRE(differences.size() == 1u);
  CATCH_CHECK(differences[0] == "model.embedding_scale: none -> sqrt_d_model");
}

CATCH_TEST_CASE("precision: bf16 trains under autocast: the same run within bfloat16's rounding", "[trainer]") {
  set_threads(1);
  for (const char* scheme : {"none", "alibi", "shaw"}) {  // fused path declined, bias, value term
    CATCH_CAPTURE(scheme);
    auto config = test::tiny_config({std::string("encoding.name=") + scheme, "train.log_every=1"});
    const auto fp32 = train_curve(config);
    config.precision = "bf16";
    const auto bf16 = train_curve(config);
    CATCH_REQUIRE(bf16.loss.size() == fp32.loss.size());
    // bfloat16 keeps 8 bits of mantissa: the first loss agrees to about 1%, and the losses differ
    CATCH_CHECK(bf16.loss.front() == Approx(fp32.loss.front()).epsilon(0.02));
    CATCH_CHECK(bf16.loss != fp32.loss);
    for (double loss : bf16.loss) CATCH_CHECK(std::isfinite(loss));
    CATCH_CHECK(std::abs(bf16.loss.back() - fp32.loss.back()) < 0.05 * fp32.loss.back());
  }
  // autocast is off again after the run
  CATCH_CHECK_FALSE(at::autocast::is_cpu_enabled());
}

CATCH_TEST_CASE("attention maps, score terms and probes are made under the extrapolation method asked for",
                "[trainer]") {
  // `pelab eval --extrapolation yarn --attention-lengths 20` wrote maps identical to none's
  auto task = test::default_task("reverse_string");
  auto config = test::tiny_config({"encoding.name=rope"});
  Encoder model = build_model(config, *task);
  Trainer trainer(config, model, *task, torch::kCPU);
  const int64_t beyond = 3 * config.train.max_length;  // a stretch factor of about 3
  const AttentionMaps none = trainer.evaluator().attention_maps(beyond, 2), yarn = trainer.evaluator().attention_maps(beyond, 2, "yarn");
  CATCH_CHECK(none.method == "none");
  CATCH_CHECK(yarn.method == "yarn");
  CATCH_CHECK((yarn.probs - none.probs).abs().max().item<double>() > 1e-3);
  CATCH_CHECK_FALSE(torch::equal(yarn.terms.scores_mean_abs, none.terms.scores_mean_abs));
  // and the model is left without the method: the same maps as before
  CATCH_CHECK(torch::equal(trainer.evaluator().attention_maps(beyond, 2).probs, none.probs));
  // within the training length yarn leaves rope as it is (factor 1)
  CATCH_CHECK(torch::allclose(trainer.evaluator().attention_maps(config.train.max_length, 2, "yarn").probs,
                              trainer.evaluator().attention_maps(config.train.max_length, 2).probs, 1e-5, 1e-6));
  const auto probes = trainer.evaluator().probes(beyond, "yarn");
  CATCH_REQUIRE_FALSE(probes.empty());
  CATCH_CHECK(probes.front().method == "yarn");
  ProbeResult other = probes.front();
  other.method = "none";
  CATCH_CHECK_FALSE(probes.front().same_settings(other));
}

CATCH_TEST_CASE("the CUDA generator's lock admits one exclusive or many shared holders and lets a waiting exclusive go first",
                "[trainer]") {
  CudaGeneratorMutex lock;
  lock.lock_shared();
  CATCH_CHECK(lock.try_lock_shared());  // shared holders together
  lock.unlock_shared();
  std::atomic<bool> exclusive_held{false};
  std::thread capture([&] {  // a capture waiting for the shared holder to finish
    std::unique_lock<CudaGeneratorMutex> exclusive(lock);
    exclusive_held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    exclusive_held = false;
  });
  // once the capture waits, a new shared holder (another run's eager step) does not go first
  bool refused = false;
  for (int i = 0; i < 2000 && !refused; ++i) {
    if (lock.try_lock_shared()) lock.unlock_shared();
    else refused = true;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  CATCH_CHECK(refused);
  CATCH_CHECK(!exclusive_held);  // still waiting: the first shared holder has not let go
  lock.unlock_shared();
  {
    std::shared_lock<CudaGeneratorMutex> after(lock);  // waits for the capture to end
    CATCH_CHECK(!exclusive_held);
  }
  capture.join();
  CATCH_CHECK(lock.try_lock_shared());
  lock.unlock_shared();
}

CATCH_TEST_CASE("t5_bias is evaluated plain and clamped in the same run, other schemes refuse clamp",
                "[trainer][t5_bias]") {
  auto config = test::tiny_config({"encoding.name=t5_bias", "eval.extrapolation=[none, clamp]", "eval.lengths=[3, 12]"});
  auto task = test::default_task("reverse_string");
  Encoder model = build_model(config, *task);
  CATCH_CHECK_NOTHROW(check_lengths_fit(config, *task, *model));
  Trainer trainer(config, std::move(model), *task, torch::kCPU);
  auto results = trainer.evaluator().evaluate();
  CATCH_REQUIRE(results.size() == 4u);
  CATCH_CHECK(results[2].method == "clamp");
  CATCH_CHECK(results[3].length == 12);
  // within the training length no distance is clamped; at 12 (24 tokens) distances beyond the
  // longest trained one change bucket
  CATCH_CHECK(results[0].loss == results[2].loss);
  CATCH_CHECK(results[1].loss != results[3].loss);
  auto alibi = test::tiny_config({"encoding.name=alibi", "eval.extrapolation=[none, clamp]"});
  Encoder alibi_model = build_model(alibi, *task);
  CATCH_CHECK_THROWS_WITH(check_lengths_fit(alibi, *task, *alibi_model),
                          test::ContainsText("extrapolation method 'clamp' (eval.extrapolation, pelab eval "
                                             "--extrapolation) needs a scheme that has one"));
}
