// Every registered scheme on the GPU: each scheme and every other value of its choice and
// bool options (test::all_scheme_variants, so a new scheme is covered by being registered),
// bidirectional and causal, trains 40 steps on the CPU and on the GPU in float32 and under
// bf16, each with CUDA graphs on and off; then evaluates at and beyond the training length,
// forwards an evaluation batch with padding keys appended, and makes attention maps.
//  - the GPU's float32 losses equal the CPU's to 1e-5 (relative), bf16's to 3%;
//  - evaluation losses: float32 to 1e-4, bf16 to 5% (beyond training, after 40 steps);
//  - padding keys change no real token's logits (float32 to 1e-4 of the largest logit, bf16 3%);
//  - float32 maps equal the CPU's to 2e-3, bf16's to 2e-2; every row is a distribution.
// Hidden ([.cuda]): ctest's gpu_registry runs it; without a CUDA device it prints "no CUDA
// device: skipped", which ctest reports as skipped. PELAB_GPU_REGISTRY_DEVICE=cpu runs the
// same legs on the CPU (float32, no graphs) to check the harness itself;
// PELAB_GPU_REGISTRY_FILTER=TEXT keeps the variants whose label contains TEXT;
// PELAB_GPU_REGISTRY_TABLE=FILE writes one line per variant and mode (docs/gpu.md).
#include "tests/catch.h"

#include "core/encodings/registry.h"
#include "core/run/run.h"
#include "core/train/trainer.h"
#include "tests/support.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

using namespace pelab;

namespace {

struct Leg {
  std::string device, precision, graphs;
  std::string label() const { return device + " " + precision + " graphs " + graphs; }
};

struct LegResult {
  std::vector<double> training_loss;  // one row per 10 steps
  std::vector<double> evaluation_loss;  // at the training length, then beyond it
  torch::Tensor maps;                   // (N, layers, heads, T, T) float32 on the CPU
  double padding_change = 0;            // max |logits padded - unpadded| / max |logits| at real tokens
};

constexpr int64_t kTrainMax = 6, kBeyond = 12, kPadding = 3;

RunConfig leg_config(const test::SchemeVariant& variant, bool causal, const Leg& leg) {
  RunConfig config = test::tiny_config({std::string("model.causal=") + (causal ? "true" : "false"), "train.steps=40",
                                        "train.log_every=10", "train.min_length=1",
                                        "train.max_length=" + std::to_string(kTrainMax), "train.batch_size=16",
                                        "eval.lengths=[" + std::to_string(kTrainMax) + "," + std::to_string(kBeyond) + "]",
                                        "eval.samples=32", "device=" + leg.device, "precision=" + leg.precision,
                                        "train.cuda_graphs=" + leg.graphs});
  config.encoding.name = variant.scheme;
  config.encoding.options = variant.options;
  config.analysis.attention_statistics = false;
  return config;
}

LegResult run_leg(const RunConfig& config) {
  PreparedRun run = prepare_run(config);
  check_lengths_fit(config, *run.task, *run.model);
  Trainer trainer(config, run.model, *run.task, run.device);
  std::ostringstream log;
  LegResult result;
  result.training_loss = trainer.train(log, false).loss;
  for (const auto& row : trainer.evaluator().evaluate()) result.evaluation_loss.push_back(row.loss);
  result.maps = trainer.evaluator().attention_maps(kBeyond, 2).probs.to(torch::kCPU, torch::kFloat32);
  // padding keys appended to an evaluation batch beyond training: the real tokens' logits stay
  torch::NoGradGuard no_grad;
  run.model->eval();
  auto [batch, positions] = trainer.evaluator().evaluation_examples(kBeyond, 8, 7);
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  const Batch padded = batch.padded(kPadding);
  AutocastScope autocast(config.precision == "bf16", run.device);
  const auto plain = run.model->forward(batch.tokens, batch.padding, contiguous_positions(B, T, run.device),
                                        batch.segments).logits.to(torch::kFloat32);
  const auto with_padding = run.model->forward(padded.tokens, padded.padding,
                                               contiguous_positions(B, T + kPadding, run.device), padded.segments)
                                .logits.narrow(1, 0, T).to(torch::kFloat32);
  result.padding_change = ((with_padding - plain).abs().max() / plain.abs().max()).item<double>();
  return result;
}

double max_relative(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1e-12, std::abs(b[i])));
  return worst;
}

}  // namespace

CATCH_TEST_CASE("every registered scheme trains, evaluates and exports maps on the GPU as on the CPU",
                "[.cuda]") {
  const char* device_env = std::getenv("PELAB_GPU_REGISTRY_DEVICE");
  const bool cpu_harness = device_env && std::string(device_env) == "cpu";
  if (!cpu_harness && !torch::cuda::is_available()) {
    std::printf("no CUDA device: skipped\n");
    return;
  }
  const char* filter = std::getenv("PELAB_GPU_REGISTRY_FILTER");
  std::vector<Leg> legs;
  if (cpu_harness) legs = {{"cpu", "fp32", "off"}};
  else legs = {{"cuda", "fp32", "off"}, {"cuda", "fp32", "on"}, {"cuda", "bf16", "off"}, {"cuda", "bf16", "on"}};

  std::ostringstream table;
  table << "| variant | mode | cpu loss | ";
  for (const auto& leg : legs) table << leg.label() << " (train, eval, maps, padding) | ";
  table << "seconds |\n";
  std::vector<std::string> failures;
  int64_t checked = 0;
  for (const auto& mode : test::in_each_mode(test::all_scheme_variants())) {
    const std::string label = mode.variant.label;
    if (filter && label.find(filter) == std::string::npos) continue;
    const auto start = std::chrono::steady_clock::now();
    const std::string where = label + (mode.causal ? " causal" : " bidirectional");
    LegResult cpu;
    try {
      cpu = run_leg(leg_config(mode.variant, mode.causal, {"cpu", "fp32", "off"}));
    } catch (const std::exception& e) {  // e.g. a length this variant cannot encode: not a GPU matter
      table << "| " << label << " | " << (mode.causal ? "causal" : "bidirectional") << " | refused on the CPU too: "
            << e.what() << " |\n";
      continue;
    }
    table << "| " << label << " | " << (mode.causal ? "causal" : "bidirectional") << " | " << std::setprecision(6)
          << cpu.training_loss.back() << " | ";
    for (const auto& leg : legs) {
      const bool bf16 = leg.precision == "bf16";
      LegResult gpu;
      try {
        gpu = run_leg(leg_config(mode.variant, mode.causal, leg));
      } catch (const std::exception& e) {
        failures.push_back(where + ", " + leg.label() + ": " + e.what());
        table << "failed | ";
        continue;
      }
      const double training = max_relative(gpu.training_loss, cpu.training_loss);
      const double evaluation = max_relative(gpu.evaluation_loss, cpu.evaluation_loss);
      const double maps = gpu.maps.sizes() == cpu.maps.sizes() ? (gpu.maps - cpu.maps).abs().max().item<double>() : INFINITY;
      const double row_sums = (gpu.maps.sum(-1) - 1).abs().max().item<double>();
      table << std::setprecision(2) << training << ", " << evaluation << ", " << maps << ", " << gpu.padding_change
            << " | ";
      std::ostringstream problem;
      if (!(training <= (bf16 ? 3e-2 : 1e-5))) problem << " training loss " << training;
      if (!(evaluation <= (bf16 ? 5e-2 : 1e-4))) problem << " evaluation loss " << evaluation;
      if (!(maps <= (bf16 ? 2e-2 : 2e-3))) problem << " maps " << maps;
      if (!(row_sums <= 2e-3)) problem << " map rows sum off by " << row_sums;
      if (mode.causal && !(gpu.maps.triu(1).abs().max().item<double>() == 0)) problem << " weight on a later key";
      if (!(gpu.padding_change <= (bf16 ? 3e-2 : 1e-4))) problem << " padding changes logits by " << gpu.padding_change;
      if (!problem.str().empty()) failures.push_back(where + ", " + leg.label() + ":" + problem.str());
    }
    table << std::setprecision(3)
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " |\n";
    ++checked;
  }
  std::printf("%s", table.str().c_str());
  if (const char* path = std::getenv("PELAB_GPU_REGISTRY_TABLE")) std::ofstream(path) << table.str();
  CATCH_CHECK(checked > 0);
  std::string all_failures;
  for (const auto& failure : failures) all_failures += "\n  " + failure;
  CATCH_INFO(failures.size() << " failures:" << all_failures);
  CATCH_CHECK(failures.empty());
}
