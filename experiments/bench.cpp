#include "experiments/bench.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include "core/kernels/blas_core.h"
#include "core/train/device_memory.h"
#include "core/config/yaml_reader.h"
#include "core/encodings/registry.h"
#include "core/io/atomic_file.h"
#include "core/model/flops.h"
#include "core/kernels/instruction_sets.h"
#include "core/run/run.h"
#include "core/train/autocast.h"
#include "core/train/metrics.h"
#include "data/task_registry.h"

namespace pelab {

namespace {

double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return double(pages_resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_resident_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

RunConfig bench_config(const BenchOptions& o, const std::string& scheme, int64_t length) {
  RunConfig c;
  c.model.d_model = o.d_model;
  c.model.num_layers = o.num_layers;
  c.model.num_heads = o.num_heads;
  c.model.d_ff = o.d_ff;
  c.model.causal = o.causal;
  c.model.attention_dropout = o.attention_dropout;
  c.encoding.name = scheme;
  for (const auto& e : scheme_registry())
    if (e.info.name == scheme) c.encoding.options = OptionValues::defaults(e.info.options);
  // schemes with a table sized in positions get one that fits the benchmark
  if (scheme == "learned") c.encoding.options.set("max_positions", length);
  if (scheme == "relative_key" || scheme == "relative_key_query") c.encoding.options.set("max_positions", length);
  c.task.name = "reverse_string";
  for (const auto& e : task_registry())
    if (e.info.name == c.task.name) c.task.options = OptionValues::defaults(e.info.options);
  c.train.batch_size = o.batch;
  c.train.min_length = c.train.max_length = length / 2;  // reverse_string: input + placeholders
  c.seed = 0;
  return c;
}

// Nanoseconds spent inside aten::mm since the process started, counted by a LibTorch
// RecordFunction callback while bench_one measures (MmClock).
std::atomic<int64_t> mm_nanoseconds{0};

struct MmStart : at::ObserverContext {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

std::unique_ptr<at::ObserverContext> mm_started(const at::RecordFunction& op) {
  if (std::strcmp(op.name(), "aten::mm") != 0) return nullptr;
  return std::make_unique<MmStart>();
}

void mm_ended(const at::RecordFunction&, at::ObserverContext* context) {
  if (!context) return;
  const auto elapsed = std::chrono::steady_clock::now() - static_cast<MmStart*>(context)->start;
  mm_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
}

// While alive, the time inside aten::mm is counted (every operator then passes through the
// callback: about a microsecond each, a few thousand per step).
class MmClock {
 public:
  MmClock()
      : handle_(at::addGlobalCallback(
            at::RecordFunctionCallback(mm_started, mm_ended).scopes({at::RecordScope::FUNCTION}))) {}
  ~MmClock() { at::removeCallback(handle_); }
  double milliseconds() const { return 1e-6 * static_cast<double>(mm_nanoseconds.load()); }

 private:
  at::CallbackHandle handle_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Waits for the device's queued work (a GPU's kernels run after their launch returns).
void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace

double matmul_peak_gflops(int64_t threads, int64_t n, const std::string& device_name, const std::string& precision) {
  set_threads(threads);
  const torch::Device device = resolve_device(device_name);
  const auto options =
      torch::TensorOptions().device(device).dtype(device.is_cuda() && precision == "bf16" ? torch::kBFloat16 : torch::kFloat);
  // into a preallocated product: a fresh 4 MB one each time would be mmap()ed and faulted
  // in inside the timing (this parent process keeps glibc's default mmap threshold)
  auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options), c = torch::empty({n, n}, options);
  double best = 1e30;
  for (int i = 0; i < 12; ++i) {
    wait_for(device);
    const auto start = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    wait_for(device);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2) best = std::min(best, seconds);  // after 2 warm-up products
  }
  return 2.0 * n * n * n / best / 1e9;
}

BenchResult bench_one(const BenchOptions& options, const std::string& scheme, int64_t length) {
  BenchResult r;
  r.scheme = scheme;
  r.length = length;
  set_threads(options.threads);
  configure_cpu_math();
  const RunConfig config = bench_config(options, scheme, length);
  const torch::Device device = resolve_device(options.device);
  const bool gpu = device.is_cuda();
  auto task = make_task(config.task.name, config.task.options, config.task.format, config.task.bos);
  Encoder model = build_model(config, *task);
  model->to(device);
  AdamStep optimizer(model->parameters(), config.train);  // the trainer's optimizer step
  Rng rng(0);
  Batch batch = task->sample(options.batch, length / 2, rng).to(device);
  auto positions = contiguous_positions(batch.tokens.size(0), batch.tokens.size(1), device);
  auto step = [&] {
    optimizer.clear_gradients();  // as the trainer
    torch::Tensor loss;
    {
      AutocastScope autocast(options.precision == "bf16", device);  // as the trainer's step
      auto out = model->forward(batch.tokens, batch.padding, positions, batch.segments);
      loss = score_batch(out.logits, batch).loss;
    }
    loss.backward();
    optimizer.step(1e-4);
  };
  const double resident_before = resident_mb();
  if (gpu) reset_cuda_peak_memory(device.index());
  const double gpu_allocated_before = gpu ? cuda_memory(device.index()).allocated_mb : 0.0;
  std::vector<double> times, per_mm;
  {
    // not on a GPU: there the callback would only add host time to every operator's launch
    std::optional<MmClock> mm;
    if (!gpu) mm.emplace();
    for (int64_t i = 0; i < options.warmup + options.repeats; ++i) {
      const double mm_before = mm ? mm->milliseconds() : 0.0;
      wait_for(device);
      const auto start = std::chrono::steady_clock::now();
      step();
      wait_for(device);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      const double mm_ms = mm ? mm->milliseconds() - mm_before : 0.0;
      if (i < options.warmup) continue;
      times.push_back(ms);
      if (mm_ms > 0) per_mm.push_back(ms / mm_ms);
    }
  }
  r.median_ms = median(times);
  r.min_ms = *std::min_element(times.begin(), times.end());
  r.step_per_mm = per_mm.empty() ? 0.0 : median(per_mm);
  r.peak_mb = gpu ? cuda_memory(device.index()).peak_mb - gpu_allocated_before : peak_resident_mb() - resident_before;
  if (!options.trace.empty()) {
    // A step under the profiler peaks higher, and the kernel faults such new pages in,
    // charging whichever operator first writes them (docs/performance.md, "Where a step's
    // time goes"): fault in 256 MB of heap first, which glibc keeps mapped once freed
    // (configure_cpu_math's trim threshold).
    if (!gpu) {
      const size_t reserve_bytes = size_t{256} << 20;
      if (void* reserve = std::malloc(reserve_bytes)) {
        std::memset(reserve, 1, reserve_bytes);
        asm volatile("" : : "r"(reserve) : "memory");  // the writes happen (no malloc/free elision)
        std::free(reserve);
      }
    }
    torch::autograd::profiler::RecordProfile profile(options.trace);  // written when it goes out of scope
    step();
  }
  return r;
}

int command_bench_worker(const BenchOptions& options, const std::string& scheme, int64_t length, std::ostream& out) {
  try {
    load_scheme_files(options.scheme_files);
    BenchResult r = bench_one(options, scheme, length);
    const std::string blas = openblas_core();
    out << "BLAS " << (blas.empty() ? std::string("other") : blas) << "\n";  // tests/benchmarks/compare.py reads it
    out << fmt::format("RESULT {} {} {:.4f} {:.4f} {:.2f} {:.4f}\n", r.scheme, r.length, r.median_ms, r.min_ms,
                       r.peak_mb, r.step_per_mm);
  } catch (const std::exception& e) {
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);  // its what() carries a backtrace
    std::string message = torch_error ? torch_error->what_without_backtrace() : e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    out << "ERROR " << scheme << " " << length << " " << message.substr(0, 300) << "\n";
    return 1;
  }
  return 0;
}

int command_bench(const BenchOptions& options, const std::string& self_executable, std::ostream& out) {
  if (!options.trace.empty() && (options.schemes.size() != 1 || options.lengths.size() != 1)) {
    out << "pelab bench: --trace profiles one scheme at one length; give --schemes and --lengths one value each\n";
    return 2;
  }
  try {
    load_scheme_files(options.scheme_files);
  } catch (const ConfigError& e) {
    out << "pelab bench: " << e.what() << "\n";
    return 2;
  }
  std::string scheme_files;  // for the workers
  for (const auto& file : options.scheme_files) scheme_files += (scheme_files.empty() ? " --scheme-files '" : ",'") + file + "'";
  for (const auto& name : options.schemes) {  // names first: not after minutes of measuring
    try {
      if (find_entry(scheme_registry(), name, "scheme").info.causal_only && !options.causal) {
        out << fmt::format("pelab bench: '{}' is defined for causal attention only; add --causal\n", name);
        return 2;
      }
    } catch (const std::invalid_argument& e) {
      out << "pelab bench: " << e.what() << "\n";
      return 2;
    }
  }
  std::vector<std::string> schemes = options.schemes;
  if (schemes.empty())
    for (const auto& e : scheme_registry())
      if (options.causal || !e.info.causal_only) schemes.push_back(e.info.name);  // xpos: with --causal
  // `none` first: every ratio is against it
  schemes.erase(std::remove(schemes.begin(), schemes.end(), "none"), schemes.end());
  schemes.insert(schemes.begin(), "none");

  torch::Device device = torch::kCPU;
  std::string cpu_kernels;
  try {
    device = resolve_device(options.device);
    cpu_kernels = kernels::instruction_set_in_use();  // PELAB_CPU_KERNELS's errors, once, here
  } catch (const std::exception& e) {
    out << "pelab bench: " << e.what() << "\n";
    return 2;
  }
  const bool gpu = device.is_cuda();
  out << fmt::format("pelab bench: training step (forward, backward, Adam) of d_model {}, {} layers, {} heads, "
                     "d_ff {}, batch {}, {}, attention dropout {}; median of {} after {} warm-up; each in its own "
                     "process, `none` right before each scheme, {} round(s); device {}, {}\n",
                     options.d_model, options.num_layers, options.num_heads, options.d_ff, options.batch,
                     options.causal ? "causal" : "bidirectional", options.attention_dropout, options.repeats,
                     options.warmup, options.rounds, options.device, options.precision);
  // a GPU's peak needs a product large enough to fill it (and to outlast the launch)
  const int64_t peak_n = gpu ? 8192 : 1024;
  auto measure_peak = [&] { return matmul_peak_gflops(options.threads, peak_n, options.device, options.precision); };
  double peak = measure_peak();
  if (gpu) {
    out << fmt::format("device: {}; matmul peak: {:.1f} GFLOP/s ({} x {} {} torch::mm, best of 10)\n",
                       device.str(), peak, peak_n, peak_n,
                       options.precision == "bf16" ? "bfloat16" : "float32") << std::flush;
  } else {
    const std::string blas = openblas_core();
    out << fmt::format("matmul peak of this machine: {:.1f} GFLOP/s (1024 x 1024 float32 torch::mm, {} threads, best "
                       "of 10; BLAS: {})\n", peak, torch::get_num_threads(),
                       blas.empty() ? std::string("not OpenBLAS") : "OpenBLAS, " + blas + " kernels") << std::flush;
    out << "pelab's CPU kernels (attention, GELU, LayerNorm): " << cpu_kernels
        << (std::getenv("PELAB_CPU_KERNELS") ? ", as PELAB_CPU_KERNELS asks\n" : "\n");
    // a user's OPENBLAS_CORETYPE is kept (core/kernels/blas_core.h), even below what the CPU runs
    const char* chosen = std::getenv("OPENBLAS_CORETYPE");
    const std::string better = better_openblas_core(blas);
    if (chosen && !better.empty())
      out << fmt::format("note: OPENBLAS_CORETYPE={} is set, and pelab keeps it; this CPU runs OpenBLAS's {} kernels "
                         "(unset it, or set it to {}, to use them)\n", chosen, better, better);
  }
  // `none` is measured right before every other scheme, and "x none" is the median over
  // rounds of those paired ratios: a shared machine's speed drifts by +-20% over minutes, which
  // a single `none` measurement at the start would pass on to every ratio.
  struct Samples {
    std::vector<double> ms, min_ms, peak_mb, per_mm, time_ratio, memory_ratio, per_mm_ratio;
    std::vector<double> peak_before;  // the matmul peak measured right before each worker
    std::string error;
    void add(const BenchResult& r, double peak_just_before) {
      if (!r.error.empty()) {
        error = r.error;
        return;
      }
      ms.push_back(r.median_ms);
      peak_before.push_back(peak_just_before);
      min_ms.push_back(r.min_ms);
      peak_mb.push_back(r.peak_mb);
      if (r.step_per_mm > 0) per_mm.push_back(r.step_per_mm);
    }
  };
  std::map<std::pair<int64_t, std::string>, Samples> samples;
  // The peak is measured again before every worker, and the table uses the best: a slow
  // moment of a shared machine during one measurement would otherwise lower the peak and
  // inflate every "% of matmul peak"
  int64_t peak_measurements = 1;
  double lowest_peak = peak;
  auto remeasure_peak = [&] {
    const double now = measure_peak();
    peak = std::max(peak, now);
    lowest_peak = std::min(lowest_peak, now);
    ++peak_measurements;
    return now;
  };
  bool trace_pending = !options.trace.empty();  // the first worker of the named scheme writes it
  auto measure = [&](const std::string& scheme, int64_t length) {
    std::string trace;
    if (trace_pending && scheme == options.schemes.front()) {
      trace = fmt::format(" --trace '{}'", options.trace);
      trace_pending = false;
    }
    const double peak_now = remeasure_peak();
    const std::string command = fmt::format(
        "'{}' bench --worker --scheme {} --lengths {} --d-model {} --layers {} --heads {} --d-ff {} --batch {} "
        "--warmup {} --repeats {} --threads {} --device {} --precision {} --attention-dropout {}{}{}{} 2>&1",
        self_executable, scheme, length, options.d_model, options.num_layers, options.num_heads, options.d_ff,
        options.batch, options.warmup, options.repeats, options.threads, options.device, options.precision,
        options.attention_dropout, options.causal ? " --causal" : "", trace, scheme_files);
    BenchResult r;
    r.scheme = scheme;
    r.length = length;
    r.error = "no result";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char line[1024];
      while (fgets(line, sizeof(line), pipe)) {
        std::istringstream in(line);
        std::string tag;
        in >> tag;
        if (tag == "RESULT") {
          in >> r.scheme >> r.length >> r.median_ms >> r.min_ms >> r.peak_mb >> r.step_per_mm;
          r.error.clear();
        } else if (tag == "ERROR") {
          std::string name, len;
          in >> name >> len;
          std::getline(in, r.error);
        }
      }
      pclose(pipe);
    }
    samples[{length, scheme}].add(r, peak_now);
    return r;
  };
  for (int64_t round = 1; round <= options.rounds; ++round) {
    for (int64_t length : options.lengths) {
      for (const auto& scheme : schemes) {
        if (scheme == "none" && schemes.size() > 1) continue;  // measured before each other scheme
        const BenchResult none = measure("none", length);
        const BenchResult r = scheme == "none" ? none : measure(scheme, length);
        std::string ratio;
        if (r.error.empty() && none.error.empty() && scheme != "none") {
          auto& s = samples[{length, scheme}];
          s.time_ratio.push_back(r.median_ms / none.median_ms);
          s.memory_ratio.push_back(r.peak_mb / none.peak_mb);
          ratio = fmt::format(", x none {:.2f} (none {:.1f} ms)", s.time_ratio.back(), none.median_ms);
          if (r.step_per_mm > 0 && none.step_per_mm > 0) {
            s.per_mm_ratio.push_back(r.step_per_mm / none.step_per_mm);
            ratio += fmt::format("; in units of their products {:.2f} / {:.2f} = x none {:.2f}", r.step_per_mm,
                                 none.step_per_mm, s.per_mm_ratio.back());
          }
        }
        out << fmt::format("  round {}/{} {:<20} T={:<6} {}\n", round, options.rounds, scheme, length,
                           r.error.empty() ? fmt::format("{:.1f} ms, {:.1f} MB{}", r.median_ms, r.peak_mb, ratio)
                                           : r.error)
            << std::flush;
      }
    }
  }

  remeasure_peak();  // and once more at the end
  out << fmt::format("matmul peak: the best of {} measurements through the run (one before each worker) is {:.1f} "
                     "GFLOP/s (the lowest {:.1f}); the table uses the best\n",
                     peak_measurements, peak, lowest_peak);
  std::string table = fmt::format(
      "\n| scheme | T | step ms | x none | step / mm | x none, in mm units | peak MB | x none | tokens/s | GFLOP/s | % "
      "of matmul peak (median step, fastest step, paired) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::string csv = "scheme,length,median_ms,min_ms,peak_mb,time_ratio,memory_ratio,tokens_per_second,gflops,"
                    "fraction_of_peak,step_per_mm,step_per_mm_ratio,fastest_fraction_of_peak,paired_fraction_of_peak\n";
  ModelConfig shape;
  shape.d_model = options.d_model;
  shape.num_layers = options.num_layers;
  shape.d_ff = options.d_ff;
  for (int64_t length : options.lengths) {
    for (const auto& scheme : schemes) {
      const auto& s = samples[{length, scheme}];
      if (s.ms.empty()) {
        table += fmt::format("| {} | {} | failed: {} | | | | | | | | |\n", scheme, length, s.error);
        continue;
      }
      const double step_ms = median(s.ms);
      const double time_ratio = scheme == "none" ? 1.0 : s.time_ratio.empty() ? 0 : median(s.time_ratio);
      const double memory_ratio = scheme == "none" ? 1.0 : s.memory_ratio.empty() ? 0 : median(s.memory_ratio);
      const double per_mm = s.per_mm.empty() ? 0 : median(s.per_mm);
      const double per_mm_ratio = scheme == "none" ? 1.0 : s.per_mm_ratio.empty() ? 0 : median(s.per_mm_ratio);
      const double seconds = step_ms / 1000.0;
      const double tokens_per_second = options.batch * length / seconds;
      const double flops = encoder_training_flops(shape, options.batch, length, 2);
      const double gflops = flops / seconds / 1e9;
      // the fastest step against the best peak: both the best this machine gave in the run
      const double fastest_ms = *std::min_element(s.min_ms.begin(), s.min_ms.end());
      const double fastest_fraction = flops / (fastest_ms / 1000.0) / 1e9 / peak;
      // each worker's median step against the peak measured right before it, the median of
      // those: both under the machine's speed of that moment
      std::vector<double> paired;
      for (size_t i = 0; i < s.ms.size(); ++i) paired.push_back(flops / (s.ms[i] / 1000.0) / 1e9 / s.peak_before[i]);
      const double paired_fraction = median(paired);
      // no mm units on a GPU (BenchResult::step_per_mm)
      const std::string per_mm_columns =
          per_mm > 0 ? fmt::format("{:.3f} | {:.2f}", per_mm, per_mm_ratio) : std::string("n/a | n/a");
      table += fmt::format(
          "| {} | {} | {:.1f} | {:.2f} | {} | {:.1f} | {:.2f} | {:.0f} | {:.1f} | {:.0f}%, {:.0f}%, {:.0f}% |\n", scheme,
          length, step_ms, time_ratio, per_mm_columns, median(s.peak_mb), memory_ratio, tokens_per_second, gflops,
          100 * gflops / peak, 100 * fastest_fraction, 100 * paired_fraction);
      csv += fmt::format("{},{},{:.4f},{:.4f},{:.2f},{:.4f},{:.4f},{:.1f},{:.3f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n",
                         scheme, length, step_ms, fastest_ms, median(s.peak_mb), time_ratio, memory_ratio,
                         tokens_per_second, gflops, gflops / peak, per_mm, per_mm_ratio, fastest_fraction,
                         paired_fraction);
    }
  }
  out << table;
  int status = 0;
  if (!options.csv.empty()) {
    try {
      write_file_atomically(options.csv, csv, "the bench table");
    } catch (const std::exception& e) {
      out << "pelab bench: " << e.what() << "\n";
      status = 1;
    }
  }
  for (const auto& [key, s] : samples)
    if (s.ms.empty()) status = 1;  // a failed measurement (its row says why)
  return status;
}

}  // namespace pelab
