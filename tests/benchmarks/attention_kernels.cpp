// The fused CPU attention kernels alone (core/kernels/attention.h, no LibTorch): the
// forward and backward time of one layer's (batch, head) pairs, for `none` and for each
// relative term the kernels take, interleaved (every round runs every term once, in turn),
// so that a term is read against `none` measured in the same minute. The "kernel benchmark"
// figures in docs/performance.md are this program's; run it with --help for its options.
//
//   build/attention_kernels_bench --length 512 --head-dim 32 --threads 2 --rounds 10
//
// Inputs are seeded normal draws (the same for every term and run). The checksum is a
// sum over the outputs and gradients: equal across runs of one build and kernel copy, and
// equal to float rounding across copies (PELAB_CPU_KERNELS or --kernels).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/encodings/deberta_buckets.h"
#include "core/kernels/attention.h"
#include "core/kernels/instruction_sets.h"

namespace {

using pelab::kernels::AttentionDims;
using pelab::kernels::AttentionGradients;
using pelab::kernels::AttentionInputs;
using pelab::kernels::MutableStrided;
using pelab::kernels::OffsetTable;
using pelab::kernels::Strided;

struct Options {
  int64_t length = 512, head_dim = 32, batch = 8, heads = 8;
  int threads = 2, rounds = 10;
  bool causal = false, per_head_tables = false;
  int64_t log_buckets = 0, log_bucket_reach = 512;  // DeBERTa's position_buckets, max_relative_positions
  std::vector<std::string> terms = {"none", "query", "key", "query+key"};
  std::string kernels;  // empty: the copy in use
};

// What a term hands the kernel: the offset tables (Rq: q_i . Rq[i - j], as relative_key;
// Rk: k_j . Rk[i - j], key-major, as the key half of relative_key_query, deberta,
// transformer_xl).
struct Term {
  std::string name;
  bool query_table = false, key_table = false;
  int products_forward() const { return 2 + query_table + key_table; }  // q k^T, p v, one per table
  int products_backward() const { return 4 + 2 * (query_table + key_table); }  // dP, dQ, dK, dV; two per table
};

Term parse_term(const std::string& name) {
  if (name == "none") return {name, false, false};
  if (name == "query") return {name, true, false};
  if (name == "key") return {name, false, true};
  if (name == "query+key") return {name, true, true};
  throw std::invalid_argument("unknown term '" + name + "' (none, query, key, query+key)");
}

// The kernel's runs (AttentionInputs::runs) for the 2T - 1 offsets in descending order:
// neighbouring offsets in one log bucket share a table row.
std::vector<int32_t> bucket_runs(int64_t length, int64_t buckets, int64_t reach) {
  std::vector<int32_t> runs(2 * length - 1);
  int64_t previous = pelab::deberta_log_bucket_of(length - 1, buckets, reach);
  int32_t run = 0;
  for (int64_t c = 0; c < 2 * length - 1; ++c) {
    const int64_t bucket = pelab::deberta_log_bucket_of(length - 1 - c, buckets, reach);
    if (bucket != previous) ++run, previous = bucket;
    runs[c] = run;
  }
  return runs;
}

// The layer's tensors, (B, H, T, Dh) contiguous, and the offset tables ((H | 1, rows, Dh):
// 2T - 1 rows, or one per run of offsets in a log bucket).
struct Layer {
  AttentionDims dims;
  std::vector<float> q, k, v, grad_out, query_table, key_table;
  std::vector<float> probs, out, grad_q, grad_k, grad_v, grad_query_table, grad_key_table;
  std::vector<int32_t> runs;  // empty: one row per offset
  int64_t table_heads, table_rows;

  Layer(const Options& o) : dims{o.batch, o.heads, o.length, o.length, o.head_dim} {
    if (o.log_buckets > 0) runs = bucket_runs(o.length, o.log_buckets, o.log_bucket_reach);
    table_rows = runs.empty() ? 2 * o.length - 1 : runs.back() + 1;
    if (table_rows == 2 * o.length - 1) runs.clear();  // no offsets share a row: as the scheme, pass no runs
    const int64_t n = o.batch * o.heads * o.length * o.head_dim, table = table_rows * o.head_dim;
    table_heads = o.per_head_tables ? o.heads : 1;
    std::mt19937 generator(1);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    auto draw = [&](int64_t size) {
      std::vector<float> values(size);
      for (auto& x : values) x = normal(generator);
      return values;
    };
    q = draw(n), k = draw(n), v = draw(n), grad_out = draw(n);
    query_table = draw(table_heads * table), key_table = draw(table_heads * table);
    probs.assign(o.batch * o.heads * o.length * pelab::kernels::probability_row_stride(o.length), 0.0f);
    out.assign(n, 0.0f), grad_q.assign(n, 0.0f), grad_k.assign(n, 0.0f), grad_v.assign(n, 0.0f);
    grad_query_table.assign(table_heads * table, 0.0f), grad_key_table.assign(table_heads * table, 0.0f);
  }
  Strided view(const std::vector<float>& x) const {
    return {x.data(), dims.heads * dims.queries * dims.head_dim, dims.queries * dims.head_dim, dims.head_dim};
  }
  MutableStrided mutable_view(std::vector<float>& x) const {
    return {x.data(), dims.heads * dims.queries * dims.head_dim, dims.queries * dims.head_dim, dims.head_dim};
  }
};

// The pairs [begin, end) of thread t of n: contiguous chunks, as at::parallel_for gives them.
std::pair<int64_t, int64_t> chunk_of(int64_t pairs, int t, int n) {
  const int64_t per = (pairs + n - 1) / n, begin = std::min<int64_t>(pairs, t * per);
  return {begin, std::min<int64_t>(pairs, begin + per)};
}

struct Timing {
  double forward_ms, backward_ms, checksum;
};

// One forward and backward of the term; the tables' gradients per thread, then summed (as
// core/model/fused_attention.cpp does).
Timing run_once(Layer& layer, const Term& term, const Options& o) {
  AttentionInputs in;
  in.q = layer.view(layer.q), in.k = layer.view(layer.k), in.v = layer.view(layer.v);
  in.scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  in.causal = o.causal;
  const int64_t table_size = layer.table_rows * o.head_dim, head_stride = o.per_head_tables ? table_size : 0;
  if (!layer.runs.empty()) in.runs = layer.runs.data(), in.run_count = layer.table_rows;
  if (term.query_table) in.query_rows = OffsetTable{layer.query_table.data(), head_stride};
  if (term.key_table) in.key_rows = OffsetTable{layer.key_table.data(), head_stride};
  const int64_t pairs = o.batch * o.heads;
  std::vector<std::vector<float>> query_grads(o.threads), key_grads(o.threads);

  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(o.threads)
  {
    const auto [begin, end] = chunk_of(pairs, omp_get_thread_num(), omp_get_num_threads());
    pelab::kernels::attention_forward(layer.dims, begin, end, in, layer.probs.data(), layer.mutable_view(layer.out));
  }
  const auto forward_done = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(o.threads)
  {
    const int t = omp_get_thread_num();
    const auto [begin, end] = chunk_of(pairs, t, omp_get_num_threads());
    AttentionGradients grad;
    grad.q = layer.mutable_view(layer.grad_q), grad.k = layer.mutable_view(layer.grad_k);
    grad.v = layer.mutable_view(layer.grad_v);
    if (term.query_table) query_grads[t].assign(layer.table_heads * table_size, 0.0f), grad.query_rows = query_grads[t].data();
    if (term.key_table) key_grads[t].assign(layer.table_heads * table_size, 0.0f), grad.key_rows = key_grads[t].data();
    pelab::kernels::attention_backward(layer.dims, begin, end, in, layer.probs.data(), layer.view(layer.grad_out),
                                       grad);
  }
  auto sum_threads = [&](std::vector<std::vector<float>>& parts, std::vector<float>& total) {
    std::fill(total.begin(), total.end(), 0.0f);
    for (const auto& part : parts)
      for (size_t i = 0; i < part.size(); ++i) total[i] += part[i];
  };
  if (term.query_table) sum_threads(query_grads, layer.grad_query_table);
  if (term.key_table) sum_threads(key_grads, layer.grad_key_table);
  const auto backward_done = std::chrono::steady_clock::now();

  double checksum = 0.0;
  for (const auto* x : {&layer.out, &layer.grad_q, &layer.grad_k, &layer.grad_v})
    for (float value : *x) checksum += value;
  if (term.query_table)
    for (float value : layer.grad_query_table) checksum += value;
  if (term.key_table)
    for (float value : layer.grad_key_table) checksum += value;
  using Ms = std::chrono::duration<double, std::milli>;
  return {Ms(forward_done - start).count(), Ms(backward_done - forward_done).count(), checksum};
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"forward and backward time of pelab's fused CPU attention kernels, per relative term, "
               "interleaved with none's"};
  app.add_option("--length", o.length, "queries = keys per sequence")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("--head-dim", o.head_dim, "head size")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--batch", o.batch, "sequences")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--heads", o.heads, "heads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--threads", o.threads, "OpenMP threads over the (batch, head) pairs")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--rounds", o.rounds, "rounds; each runs every term once (after one untimed round)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--terms", o.terms, "none, query (q_i . Rq[i - j]), key (k_j . Rk[i - j]), query+key")
      ->capture_default_str();
  app.add_flag("--causal", o.causal, "causal attention (key j <= query i)");
  app.add_flag("--per-head-tables", o.per_head_tables, "one offset table per head (default: one shared)");
  app.add_option("--log-buckets", o.log_buckets,
                 "tables by DeBERTa's log buckets (its position_buckets; 0: one row per offset)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--log-bucket-reach", o.log_bucket_reach, "the distance the log buckets reach (max_relative_positions)")
      ->capture_default_str()->check(CLI::Range(2, 1 << 24));
  app.add_option("--kernels", o.kernels, "the kernels' copy: baseline, avx2 or avx512 (default: the one in use)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!o.kernels.empty()) pelab::kernels::use_instruction_set(o.kernels);
    const std::string problem = pelab::deberta_bucket_settings_problem(o.log_buckets, o.log_bucket_reach);
    if (!problem.empty())  // the scheme's own check, in its option names
      throw std::invalid_argument("--log-buckets, --log-bucket-reach (deberta's position_buckets, "
                                  "max_relative_positions): " + problem);
    std::vector<Term> terms;
    for (const auto& name : o.terms) terms.push_back(parse_term(name));
    Layer layer(o);
    const double pairs_of_query_key = o.causal ? o.length * (o.length + 1) / 2.0 : double(o.length) * o.length,
                 flops_per_product = 2.0 * o.batch * o.heads * pairs_of_query_key * o.head_dim;
    std::printf("attention kernels: %lld x %lld (batch, head) pairs, T %lld, head size %lld, %s, %s tables of %lld rows%s, "
                "%d threads, %s copy; %d interleaved rounds after one untimed\n",
                static_cast<long long>(o.batch), static_cast<long long>(o.heads), static_cast<long long>(o.length),
                static_cast<long long>(o.head_dim), o.causal ? "causal" : "bidirectional",
                o.per_head_tables ? "per-head" : "shared", static_cast<long long>(layer.table_rows),
                layer.runs.empty() ? "" : " (log-bucket runs)", o.threads,
                pelab::kernels::instruction_set_in_use().c_str(), o.rounds);
    for (const auto& term : terms) run_once(layer, term, o);  // warm-up: pages, caches
    std::vector<std::vector<Timing>> timings(terms.size());
    for (int round = 0; round < o.rounds; ++round)
      for (size_t t = 0; t < terms.size(); ++t) timings[t].push_back(run_once(layer, terms[t], o));

    // x none: the median over rounds of the term's forward + backward over none's in that round
    const auto none = std::find_if(terms.begin(), terms.end(), [](const Term& t) { return t.name == "none"; });
    std::printf("%-10s %22s %22s %10s %10s %8s %16s\n", "term", "forward ms (min)", "backward ms (min)",
                "fwd GFLOP/s", "bwd GFLOP/s", "x none", "checksum");
    for (size_t t = 0; t < terms.size(); ++t) {
      std::vector<double> forward, backward, ratio;
      for (size_t r = 0; r < timings[t].size(); ++r) {
        forward.push_back(timings[t][r].forward_ms), backward.push_back(timings[t][r].backward_ms);
        if (none != terms.end()) {
          const Timing& n = timings[none - terms.begin()][r];
          ratio.push_back((timings[t][r].forward_ms + timings[t][r].backward_ms) / (n.forward_ms + n.backward_ms));
        }
      }
      const double forward_median = median(forward), backward_median = median(backward);
      char x_none[16] = "-";
      if (!ratio.empty()) std::snprintf(x_none, sizeof x_none, "%.3f", median(ratio));
      char forward_text[32], backward_text[32];
      std::snprintf(forward_text, sizeof forward_text, "%.2f (%.2f)", forward_median,
                    *std::min_element(forward.begin(), forward.end()));
      std::snprintf(backward_text, sizeof backward_text, "%.2f (%.2f)", backward_median,
                    *std::min_element(backward.begin(), backward.end()));
      std::printf("%-10s %22s %22s %10.1f %10.1f %8s %16.8g\n", terms[t].name.c_str(), forward_text, backward_text,
                  terms[t].products_forward() * flops_per_product / (forward_median * 1e6),
                  terms[t].products_backward() * flops_per_product / (backward_median * 1e6), x_none,
                  timings[t].back().checksum);
      if (!std::isfinite(timings[t].back().checksum)) throw std::runtime_error(terms[t].name + ": not finite");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_kernels_bench: %s\n", e.what());
    return 1;
  }
}
