// `pelab bench`: training-step time and peak memory of every scheme at given lengths, each
// measured in a fresh child process (so one scheme's peak memory cannot hide another's),
// reported next to `none`'s: `none` is measured right before every other scheme, and the
// ratios are the medians over rounds of those pairs (of milliseconds, and of steps in units
// of their own matrix products: BenchResult::step_per_mm).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pelab {

struct BenchOptions {
  std::vector<std::string> schemes;       // empty: every registered scheme
  std::vector<std::string> scheme_files;  // Python files defining schemes (docs/python-schemes.md)
  std::vector<int64_t> lengths = {512, 2048};  // sequence lengths (tokens)
  int64_t d_model = 64, num_layers = 2, num_heads = 4, d_ff = 256, batch = 2;
  int64_t warmup = 2, repeats = 5, threads = 0;
  int64_t rounds = 1;                      // each: `none` right before every other scheme
  bool causal = false;
  double attention_dropout = 0.0;          // model.attention_dropout of the trained model
  std::string device = "cpu";              // cpu | cuda | auto: where the workers train
  std::string precision = "fp32";          // fp32 | bf16 (autocast)
  std::string csv;                         // also write the table here
  std::string trace;                       // one more step under LibTorch's profiler, as a Chrome trace here
};

struct BenchResult {
  std::string scheme;
  int64_t length = 0;
  double median_ms = 0, min_ms = 0;
  // CPU: peak resident memory of the steps above the model's resident memory; CUDA: the
  // caching allocator's peak of the steps above what the model and batch hold
  double peak_mb = 0;
  // The step in units of its own matrix products: the median over the measured steps of
  // step time / time inside aten::mm (the linear layers' OpenBLAS products, plus any small
  // table product a scheme adds). A shared machine's speed swings by tens of percent within
  // seconds, and both times swing together: the ratio of two schemes' values is a far
  // steadier "x none" than the ratio of their milliseconds. 0 on a GPU, where the host's
  // clock around an operator measures its launch, not its run.
  double step_per_mm = 0;
  std::string error;   // non-empty when the scheme failed at this length
};

// The machine's matrix-product peak in GFLOP/s: an n x n x n product, best of 10 after 2
// warm-ups; float32 on the CPU, `precision`'s dtype (float32 or bfloat16) on a GPU.
double matmul_peak_gflops(int64_t threads, int64_t n, const std::string& device = "cpu",
                          const std::string& precision = "fp32");
// One measurement in this process (the child side).
BenchResult bench_one(const BenchOptions& options, const std::string& scheme, int64_t length);
// Every scheme x length, each in a child `pelab bench --worker`; prints the table.
int command_bench(const BenchOptions& options, const std::string& self_executable, std::ostream& out);
// The child: measures and prints one machine-readable line.
int command_bench_worker(const BenchOptions& options, const std::string& scheme, int64_t length, std::ostream& out);

}  // namespace pelab
