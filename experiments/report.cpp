#include "experiments/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/config/sweep_config.h"
#include "core/config/yaml_reader.h"
#include "core/io/atomic_file.h"
#include "core/io/csv_fields.h"
#include "core/io/hdf5_store.h"
#include "core/io/schema.h"
#include "experiments/sweep.h"

namespace pelab {

namespace {

// A table cell of the metric: a loss to 3 decimals, an accuracy (in %) to 1. (Two literal
// formats: fmt 12, LibTorch 2.x's under C++20, checks format strings at compile time.)
std::string metric_cell(double x, bool loss) { return loss ? fmt::format("{:.3f}", x) : fmt::format("{:.1f}", x); }

// One line of the table: a group (the runs that differ only by seed) and a method.
struct Line {
  std::string group, method;
  std::string task;  // of the group's first run: --sort summary ranks within a task
  int64_t train_min = 0, train_max = 0;
  std::map<int64_t, std::vector<double>> values, chance;  // per test length, over seeds
  std::map<int64_t, std::set<std::string>> untrained;     // EvalResult::untrained texts
  std::vector<std::map<int64_t, double>> seeds;            // each seed's values by length (a run
                                                           //   that has not learned: within training only)
  std::vector<int64_t> summary_lengths;  // beyond training, and evaluated for every seed
  std::vector<double> summary;           // per seed: the mean over summary_lengths
  std::map<int64_t, std::vector<double>> free;  // the position-free baseline per test length, over
                                                //   seeds (tasks that have one; not for the loss)
};

struct Aggregate {
  double value = NAN;  // what the cell shows: the mean, median or max
  double mean = NAN, std = 0, median = NAN, q1 = NAN, q3 = NAN, min = NAN, max = NAN;
  double ci_low = NAN, ci_high = NAN;  // the median's order-statistic interval (n >= 2)
  size_t rank = 0;                     //   [x_(rank), x_(n+1-rank)]
  double coverage = NAN;               //   holding the median with this probability
  size_t n = 0;
  size_t successes = 0;
};

// numpy's default (linear) quantile of sorted values
double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * (sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - below) * (sorted[above] - sorted[below]);
}

double mean_of(const std::vector<double>& values) {
  double sum = 0;
  for (double x : values) sum += x;
  return values.empty() ? NAN : sum / values.size();
}

// The median's distribution-free interval of order statistics: of n sorted values, [x_(k),
// x_(n+1-k)] holds the median of the (continuous) distribution they were drawn from unless k
// or more fall on one side of it: with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1). The
// interval is the narrowest with at least 95%: the largest such k; from 6 values on there is
// one (n = 6: the range, 96.9%), below 6 none, and the range (k = 1) is given with what it
// holds (1 - 2^(1-n): n = 5, 93.8%; n = 2, 50%).
double order_statistic_coverage(size_t n, size_t k) {
  double tail = 0, choose = 1;  // P(Binomial(n, 1/2) <= k - 1), C(n, i) built up
  for (size_t i = 0; i < k; ++i) {
    tail += choose;
    choose = choose * double(n - i) / double(i + 1);
  }
  return 1.0 - 2.0 * tail / std::pow(2.0, double(n));
}

size_t order_statistic_rank(size_t n) {
  size_t k = 1;
  while (k + 1 <= n / 2 && order_statistic_coverage(n, k + 1) >= 0.95) ++k;
  return k;
}

constexpr size_t kIntervalMinN = 6;  // the fewest values whose interval holds the median with 95%

Aggregate aggregate_of(std::vector<double> values, const ReportArguments& a) {
  Aggregate g;
  g.n = values.size();
  if (values.empty()) return g;
  std::sort(values.begin(), values.end());
  g.mean = mean_of(values);
  double squares = 0;
  for (double x : values) squares += (x - g.mean) * (x - g.mean);
  g.std = g.n > 1 ? std::sqrt(squares / (g.n - 1)) : 0.0;  // the sample standard deviation
  g.median = quantile(values, 0.5);
  g.q1 = quantile(values, 0.25);
  g.q3 = quantile(values, 0.75);
  g.min = values.front();
  g.max = values.back();
  if (g.n >= 2) {
    g.rank = order_statistic_rank(g.n);
    g.ci_low = values[g.rank - 1];
    g.ci_high = values[g.n - g.rank];
    g.coverage = order_statistic_coverage(g.n, g.rank);
  }
  const bool loss = a.metric == "loss";
  const bool median = a.aggregate == "median" || a.aggregate == "median-ci";
  g.value = median ? g.median : a.aggregate == "max" ? (loss ? g.min : g.max) : g.mean;
  if (a.success >= 0) {
    const double threshold = loss ? a.success : 100 * a.success;  // accuracies are shown in percent
    for (double x : values) g.successes += loss ? x <= threshold : x >= threshold;
  }
  return g;
}

// `show_n`: append the cell's number of values "(n)"; left out where every cell has the same n
// (the notes say it) and where --success shows it as k/n.
std::string format_cell(const Aggregate& g, const ReportArguments& a, bool show_n) {
  if (g.n == 0) return "";
  const bool loss = a.metric == "loss";
  auto number = [&](double x) { return metric_cell(x, loss); };
  std::string text;
  if (a.aggregate == "median") text = fmt::format("{} [{}-{}]", number(g.median), number(g.q1), number(g.q3));
  else if (a.aggregate == "median-ci")
    text = g.n >= 2 ? fmt::format("{} [{}, {}]", number(g.median), number(g.ci_low), number(g.ci_high))
                    : number(g.median);
  else if (a.aggregate == "max") text = fmt::format("{} [{}]", number(g.value), number(loss ? g.max : g.min));
  else text = fmt::format("{} +- {}", number(g.mean), number(g.std));
  if (show_n) text += fmt::format(" ({})", g.n);
  if (a.success >= 0) text += fmt::format(" {}/{}", g.successes, g.n);
  return text;
}

// "encoding.name=rope seed=1 eval.lengths=[5, 10]" -> "encoding=rope lengths=[5, 10]": the
// axis values but the seed and the `pooled` keys, labelled as in run ids.
std::string without_seed(const std::string& overrides, const std::vector<std::string>& pooled) {
  std::vector<std::string> items;  // split before each "key=" (values may hold spaces: [5, 10])
  std::istringstream in(overrides);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    const bool starts_item = eq != std::string::npos && word.find('[') > eq && word.find('{') > eq;
    if (starts_item || items.empty()) items.push_back(word);
    else items.back() += " " + word;
  }
  std::string out;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (key == "seed" || std::find(pooled.begin(), pooled.end(), key) != pooled.end()) continue;
    out += (out.empty() ? "" : " ") + axis_label(item.substr(0, eq)) + item.substr(eq);
  }
  return out.empty() ? "(base)" : out;
}

// A table line's method: the extrapolation method, with the evaluation condition and its
// value when the row has one ("none depth=0.25"), so that every depth is a line of its own.
std::string row_key(const EvalResult& row) {
  return row.condition.empty() ? row.method : fmt::format("{} {}={:g}", row.method, row.condition, row.condition_value);
}

// The run's rows under the report's settings: row_key -> length -> row. Among rows of one
// method and length left, the one with the most samples, then the last written.
std::map<std::string, std::map<int64_t, EvalResult>> selected_rows(const RunRecord& record, const ReportArguments& a) {
  const int64_t step = a.step >= 0 ? a.step : record.train_steps;
  const std::string sampler = a.sampler.empty() ? record.run_sampler : a.sampler;
  std::map<std::string, std::map<int64_t, EvalResult>> rows;
  for (const auto& row : record.evaluation) {
    if ((!a.method.empty() && row.method != a.method) || row.step != step || row.sampler != sampler) continue;
    if (a.sampler_max_length > 0 ? row.positions_max_length != a.sampler_max_length
                                 : a.sampler.empty() && row.positions_max_length != record.run_positions_max_length)
      continue;
    if (a.samples > 0 && row.samples != a.samples) continue;
    auto [it, inserted] = rows[row_key(row)].emplace(row.length, row);
    if (!inserted && row.samples >= it->second.samples) it->second = row;
  }
  return rows;
}

// The position-free baseline in the metric (%), NaN where the task has none or for the loss
double position_free_of(const EvalResult& e, const std::string& metric) {
  if (metric == "token") return 100 * e.position_free_token_accuracy;
  if (metric == "sequence") return 100 * e.position_free_sequence_accuracy;
  return NAN;
}

// A per-run file's number that may be empty (NaN)
std::string optional_number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : std::string(); }

double metric_of(const EvalResult& e, const std::string& metric, bool chance) {
  if (metric == "token") return 100 * (chance ? e.chance_token_accuracy : e.per_token_accuracy);
  if (metric == "sequence") return 100 * (chance ? e.chance_sequence_accuracy : e.per_sequence_accuracy);
  return chance ? e.chance_loss : e.loss;
}

std::string latex_escape(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '_' || c == '%' || c == '&' || c == '#' || c == '$' || c == '{' || c == '}') out += '\\';
    out += c;
  }
  size_t at = 0;
  while ((at = out.find("+-", at)) != std::string::npos) out.replace(at, 2, "$\\pm$"), at += 5;
  return out;
}

// One run as the table reads it: its rows under the report's settings (method -> length -> row),
// from its run file (selected_rows) or from a per-run file an earlier report wrote
// (report_runs.csv; a study ships it as <sweep>_runs.csv beside its page): the rows that
// report selected.
struct ReportRun {
  std::string id, overrides, task, seed;  // seed: empty in a per-run file written before it was a column
  int64_t train_min_length = 0, train_max_length = 0, train_steps = 0;
  std::map<std::string, std::map<int64_t, EvalResult>> rows;
};

ReportRun report_run(const SweepDirectoryRun& run, const RunRecord& record, const ReportArguments& a) {
  const YAML::Node config = parse_yaml(record.config_yaml, "the run's config");
  const YAML::Node task = config["task"]["name"], seed = config["seed"];
  return {run.id, run.overrides, task ? task.as<std::string>() : "", seed ? seed.as<std::string>() : "",
          record.train_min_length,
          record.train_max_length, record.train_steps, selected_rows(record, a)};
}

// The columns of report_runs.csv, in order; a file without one of kAddedPerRunColumns (written
// before they were added) reads as having no task name, no seed and no untrained rows.
constexpr const char* kPerRunColumns[] = {
    "run", "group", "overrides", "task", "seed", "method", "length", "beyond_training", "per_token_accuracy",
    "per_sequence_accuracy", "loss", "chance_token_accuracy", "chance_sequence_accuracy", "chance_loss", "samples",
    "train_min_length", "train_max_length", "train_steps", "in_distribution_token_accuracy", "learned", "untrained",
    "condition", "condition_value", "position_free_token_accuracy", "position_free_sequence_accuracy"};
const std::set<std::string> kAddedPerRunColumns = {"task", "seed", "untrained", "condition", "condition_value",
                                                   "position_free_token_accuracy", "position_free_sequence_accuracy"};

bool is_per_run_file(const std::string& path) { return std::filesystem::path(path).extension() == ".csv"; }

// The runs of a per-run file, in its order. Its rows were selected when it was written, so
// --step, --sampler and --sampler-max-length cannot select again; --method and --samples filter.
std::vector<ReportRun> runs_of_per_run_file(const std::string& path, const ReportArguments& a,
                                            std::set<std::string>& settings_there) {
  if (a.step >= 0 || !a.sampler.empty() || a.sampler_max_length > 0)
    throw std::runtime_error(path + ": a per-run file holds the rows its report selected; --step, --sampler and "
                             "--sampler-max-length select from run files");
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) throw std::runtime_error(path + " cannot be read, or is empty");
  const auto header = csv_fields(line);
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  for (const char* name : kPerRunColumns)
    if (!column.count(name) && !kAddedPerRunColumns.count(name))
      throw std::runtime_error(fmt::format("{}: not a per-run file (pelab report's report_runs.csv): no column '{}'",
                                           path, name));
  std::vector<ReportRun> runs;
  int64_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    const auto fields = csv_fields(line);
    if (fields.size() != header.size())
      throw std::runtime_error(fmt::format("{}:{}: {} fields, the header has {}", path, line_number, fields.size(),
                                           header.size()));
    auto field = [&](const char* name) -> const std::string& { return fields[column.at(name)]; };
    auto added_field = [&](const char* name) { return column.count(name) ? field(name) : std::string(); };
    try {
      EvalResult row;
      row.method = field("method");
      row.length = std::stoll(field("length"));
      row.per_token_accuracy = std::stod(field("per_token_accuracy"));
      row.per_sequence_accuracy = std::stod(field("per_sequence_accuracy"));
      row.loss = std::stod(field("loss"));
      row.chance_token_accuracy = std::stod(field("chance_token_accuracy"));
      row.chance_sequence_accuracy = std::stod(field("chance_sequence_accuracy"));
      row.chance_loss = std::stod(field("chance_loss"));
      row.samples = std::stoll(field("samples"));
      for (auto [name, value] : {std::pair{"position_free_token_accuracy", &row.position_free_token_accuracy},
                                 std::pair{"position_free_sequence_accuracy", &row.position_free_sequence_accuracy}})
        if (!added_field(name).empty()) *value = std::stod(added_field(name));
      row.untrained = added_field("untrained");
      row.condition = added_field("condition");
      if (!row.condition.empty()) row.condition_value = std::stod(field("condition_value"));
      if (runs.empty() || runs.back().id != field("run"))
        runs.push_back({field("run"), field("overrides"), added_field("task"), added_field("seed"),
                        std::stoll(field("train_min_length")),
                        std::stoll(field("train_max_length")), std::stoll(field("train_steps")), {}});
      settings_there.insert(fmt::format("method {} samples {}", row.method, row.samples));
      if ((!a.method.empty() && row.method != a.method) || (a.samples > 0 && row.samples != a.samples)) continue;
      runs.back().rows[row_key(row)][row.length] = row;
    } catch (const std::logic_error&) {  // stoll/stod: not a number
      throw std::runtime_error(fmt::format("{}:{}: a number field is not a number", path, line_number));
    }
  }
  return runs;
}

}  // namespace

std::string report_file_stem(const ReportArguments& a) {
  const ReportArguments defaults;
  std::vector<std::string> parts = {"report"};
  auto add = [&](const char* key, const std::string& value) {
    std::string safe;  // a file name: letters, digits, '.', '_', '+' and '-'
    for (char c : value)
      safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-' ? c : '-';
    parts.push_back(std::string(key) + "-" + safe);
  };
  auto number = [](double x) { return fmt::format("{:g}", x); };
  if (a.metric != defaults.metric) add("metric", a.metric);
  if (a.aggregate != defaults.aggregate) add("aggregate", a.aggregate);
  if (!a.pool.empty()) add("pool", join(a.pool, "+"));
  if (a.success >= 0) add("success", number(a.success));
  if (a.learned >= 0) add("learned", number(a.learned));
  if (a.learned >= 0 && a.learned_metric != defaults.learned_metric) add("learned-metric", a.learned_metric);
  if (!a.method.empty()) add("method", a.method);
  if (a.step >= 0) add("step", std::to_string(a.step));
  if (!a.sampler.empty()) add("sampler", a.sampler);
  if (a.sampler_max_length > 0) add("sampler-max-length", std::to_string(a.sampler_max_length));
  if (a.samples > 0) add("samples", std::to_string(a.samples));
  if (a.sort != defaults.sort) add("sort", a.sort);
  return join(parts, "_");
}

int command_report(const ReportArguments& a, std::ostream& out, std::ostream& err) {
  if (a.success > 1 && a.metric != "loss") {
    err << "error: --success is a share of accuracy, at most 1 (0.9 for 90%)\n";
    return 2;
  }
  if (a.learned > 1) {
    err << "error: --learned is a share of accuracy, at most 1 (0.9 for 90%)\n";
    return 2;
  }
  if (a.paths.empty()) {
    err << "error: give sweep directories or run files (run.h5)\n";
    return 2;
  }
  // one sweep directory: its index is refreshed and the report written there, as before
  const bool one_sweep = a.paths.size() == 1 && std::filesystem::is_directory(a.paths.front());
  const std::string out_dir = !a.out_dir.empty() ? a.out_dir : one_sweep ? a.paths.front() : std::string();
  std::vector<SweepDirectoryRun> runs;  // every run given, in order; a per-run file's runs stand as
  std::vector<ReportRun> file_runs;      //   kFromPerRunFile, their rows in file_runs (in order)
  const std::string kFromPerRunFile = "per-run file";
  std::set<std::string> settings_there;  // what the runs have, for an empty selection's message
  try {
    for (const auto& given : a.paths) {
      // a run's folder (pelab train's output.dir) stands for its run file, as in pelab.load
      const bool run_folder = std::filesystem::is_directory(given) && !std::filesystem::exists(given + "/runs.tsv") &&
                              std::filesystem::exists(given + "/" + schema::kRunFileName);
      const std::string path = run_folder ? given + "/" + schema::kRunFileName : given;
      if (std::filesystem::is_directory(path)) {
        for (auto& run : sweep_directory_runs(path)) runs.push_back(run);
        continue;
      }
      if (!std::filesystem::exists(path))
        throw std::runtime_error(path + " does not exist: give sweep directories, run files (run.h5) or per-run "
                                        "files (report_runs.csv)");
      if (is_per_run_file(path)) {
        for (auto& run : runs_of_per_run_file(path, a, settings_there)) {
          runs.push_back({run.id, run.overrides, path, kFromPerRunFile, ""});
          file_runs.push_back(std::move(run));
        }
        continue;
      }
      // a run file (under any name): its own group, named by its run name
      SweepDirectoryRun run;
      run.dir = path;  // the file itself (read below)
      const int64_t version = complete_run_file_version(path);
      run.state = version == schema::kSchemaVersion ? "complete" : version >= 0 ? "outdated" : "not complete";
      if (version < 0) {  // unfinished (its status attribute), or no run file at all (truncated, another format)
        try {
          read_run_file(path, /*with_checkpoint=*/false);
        } catch (const std::exception& e) {
          run.state = "unreadable";
          run.error = e.what();
        }
      }
      run.id = path;
      if (run.state == "complete") {
        const std::string name = read_run_file(path, /*with_checkpoint=*/false).run_name;
        run.overrides = "run=" + name;
      }
      runs.push_back(run);
    }
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  const std::string described = a.paths.size() == 1 ? a.paths.front() : join(a.paths, ", ");
  std::vector<Line> lines;
  std::set<int64_t> lengths;
  std::vector<std::string> problems;
  int64_t complete = 0, without_rows = 0;
  std::vector<std::string> not_learned;  // --learned: "run [method]" below the threshold
  std::ostringstream per_run;            // report_runs.csv
  for (size_t i = 0; i < std::size(kPerRunColumns); ++i) per_run << (i ? "," : "") << kPerRunColumns[i];
  per_run << "\n";
  size_t next_file_run = 0;
  for (const auto& run : runs) {
    ReportRun report;
    if (run.state == kFromPerRunFile) {
      report = std::move(file_runs[next_file_run++]);
    } else {
      if (run.state != "complete") {
        problems.push_back(run.state == "failed"       ? fmt::format("  {} failed: {}\n", run.id, run.error)
                           : run.state == "unreadable" ? fmt::format("  {} cannot be read: {}\n", run.id, run.error)
                                                       : fmt::format("  {} is {}\n", run.id, run.state == "outdated"
                                                             ? "from another pelab (schema version): not read"
                                                             : "not complete"));
        continue;
      }
      RunRecord record;
      try {
        const bool file = std::filesystem::is_regular_file(run.dir);  // a run file given as such
        record = read_run_file(file ? run.dir : run.dir + "/" + schema::kRunFileName, /*with_checkpoint=*/false);
      } catch (const std::exception& e) {
        problems.push_back(fmt::format("  {} cannot be read: {}\n", run.id, e.what()));
        continue;
      }
      for (const auto& row : record.evaluation)
        settings_there.insert(fmt::format("method {} step {} sampler {}{} samples {}", row.method, row.step,
                                          row.sampler,
                                          row.positions_max_length ? fmt::format(" ({})", row.positions_max_length) : "",
                                          row.samples));
      report = report_run(run, record, a);
    }
    ++complete;
    if (report.rows.empty()) ++without_rows;
    for (const auto& [method, by_length] : report.rows) {
      const std::string group = without_seed(report.overrides, a.pool);
      // in-distribution: the mean per-token accuracy at the evaluated lengths within training (the
      // per-run file's column); --learned judges the longest of them (normally the longest
      // training length, the hardest: a mean would let an easy short length carry a run), in
      // the measure --learned-metric names
      double in_range_sum = 0, judged_accuracy = NAN;
      int64_t in_range = 0, judged_length = -1;
      for (const auto& [length, row] : by_length)
        if (length >= report.train_min_length && length <= report.train_max_length) {
          in_range_sum += row.per_token_accuracy, ++in_range;
          judged_length = length;  // by_length ascends
          judged_accuracy = a.learned_metric == "sequence" ? row.per_sequence_accuracy : row.per_token_accuracy;
        }
      const double in_distribution = in_range ? in_range_sum / in_range : NAN;
      const bool judged = a.learned >= 0 && in_range > 0;
      const bool learned = !judged || judged_accuracy >= a.learned;
      if (!learned)
        not_learned.push_back(fmt::format("{} [{}] {:.1f}% at {}", report.id, method, 100 * judged_accuracy, judged_length));
      // every value as the shortest text that reads back to the same double: a report of this
      // file gives this report's table to the digit
      for (const auto& [length, row] : by_length)
        per_run << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", report.id,
                               quoted_csv(group), quoted_csv(report.overrides), report.task, report.seed, row.method,
                               length,
                               length > report.train_max_length ? 1 : 0, row.per_token_accuracy,
                               row.per_sequence_accuracy, row.loss, row.chance_token_accuracy,
                               row.chance_sequence_accuracy, row.chance_loss, row.samples, report.train_min_length,
                               report.train_max_length, report.train_steps,
                               in_range ? fmt::format("{}", in_distribution) : "",
                               judged ? (learned ? "1" : "0") : "", quoted_csv(row.untrained), row.condition,
                               row.condition.empty() ? std::string() : fmt::format("{}", row.condition_value),
                               optional_number(row.position_free_token_accuracy),
                               optional_number(row.position_free_sequence_accuracy));
      auto line = std::find_if(lines.begin(), lines.end(),
                               [&](const Line& l) { return l.group == group && l.method == method; });
      if (line == lines.end()) {
        lines.push_back({group, method, report.task, report.train_min_length, report.train_max_length, {}, {}, {}, {}, {},
                         {}});
        line = lines.end() - 1;
      }
      line->train_min = std::min(line->train_min, report.train_min_length);
      line->train_max = std::max(line->train_max, report.train_max_length);
      std::map<int64_t, double> seed;
      for (const auto& [length, row] : by_length) {
        if (!learned && length > report.train_max_length) continue;  // generalization of what was not learned
        lengths.insert(length);
        seed[length] = metric_of(row, a.metric, false);
        line->values[length].push_back(seed[length]);
        line->chance[length].push_back(metric_of(row, a.metric, true));
        const double free = position_free_of(row, a.metric);
        if (std::isfinite(free)) line->free[length].push_back(free);
        if (!row.untrained.empty()) line->untrained[length].insert(row.untrained);
      }
      line->seeds.push_back(seed);
    }
  }
  if (complete > 0 && without_rows == complete) {
    err << "error: no run has evaluation rows under these settings; the runs have: "
        << join(std::vector<std::string>(settings_there.begin(), settings_there.end()), "; ") << "\n";
    return 1;
  }
  // the summary: each seed's mean over the lengths beyond training that every seed has, so
  // that seeds (and lines) average the same lengths (seeds that have not learned: left out)
  for (auto& line : lines) {
    std::vector<std::map<int64_t, double>> beyond;  // the seeds with values beyond training
    for (const auto& seed : line.seeds)
      if (!seed.empty() && seed.rbegin()->first > line.train_max) beyond.push_back(seed);
    if (beyond.empty()) continue;
    for (const auto& [length, value] : beyond.front())
      if (length > line.train_max &&
          std::all_of(beyond.begin(), beyond.end(), [&](const auto& s) { return s.count(length) > 0; }))
        line.summary_lengths.push_back(length);
    if (line.summary_lengths.empty()) continue;
    for (const auto& seed : beyond) {
      double sum = 0;
      for (int64_t L : line.summary_lengths) sum += seed.at(L);
      line.summary.push_back(sum / line.summary_lengths.size());
    }
  }
  const bool loss = a.metric == "loss";
  if (a.sort == "summary") {
    std::map<std::string, size_t> task_order;  // tasks in the order they first appear; lines ranked within each
    for (const auto& line : lines) task_order.emplace(line.task, task_order.size());
    std::stable_sort(lines.begin(), lines.end(), [&](const Line& x, const Line& y) {
      if (x.task != y.task) return task_order.at(x.task) < task_order.at(y.task);
      const double vx = aggregate_of(x.summary, a).value, vy = aggregate_of(y.summary, a).value;
      if (std::isnan(vx) || std::isnan(vy)) return !std::isnan(vx) && std::isnan(vy);
      return loss ? vx < vy : vx > vy;
    });
  }
  // one chance line when every group has the same chance levels (one task), else one per group;
  // the same for the position-free baseline (of the groups that have one: all or none)
  auto shared_level = [&](std::map<int64_t, std::vector<double>> Line::*level, std::map<int64_t, double>& shared) {
    bool one = true;
    for (const auto& line : lines) {
      one = one && (line.*level).empty() == (lines.front().*level).empty();
      for (const auto& [length, values] : line.*level) {
        const double c = mean_of(values);
        auto [it, inserted] = shared.emplace(length, c);
        one = one && (inserted || std::abs(it->second - c) < 1e-9);
      }
    }
    return one;
  };
  std::map<int64_t, double> shared_chance, shared_free;
  const bool one_chance = shared_level(&Line::chance, shared_chance);
  const bool one_free = shared_level(&Line::free, shared_free);
  const bool several_methods = std::any_of(lines.begin(), lines.end(), [&](const Line& l) { return l.method != lines.front().method; });

  std::set<std::string> untrained_schemes;  // the schemes named by rows' untrained texts
  std::map<size_t, std::pair<size_t, double>> intervals;  // median-ci: per n, the rank and coverage
  auto note_interval = [&](const Aggregate& g) {
    if (a.aggregate == "median-ci" && g.n >= 2) intervals[g.n] = {g.rank, g.coverage};
  };
  // the number of values in each cell: shown once in the notes where it is the same everywhere
  std::set<size_t> cell_ns;
  for (const auto& line : lines) {
    for (const auto& [length, values] : line.values) cell_ns.insert(values.size());
    if (!line.summary.empty()) cell_ns.insert(line.summary.size());
  }
  const bool one_n = cell_ns.size() == 1;
  const bool show_n = !one_n && a.success < 0;
  std::vector<std::string> header = {"run", "trained"};
  for (int64_t L : lengths) header.push_back(std::to_string(L));
  header.push_back("beyond");
  std::vector<std::vector<std::string>> table;
  std::ostringstream csv;
  csv << "group,method,train_min_length,train_max_length,length,beyond_training,metric,aggregate,value,mean,std,"
         "median,q1,q3,min,max,seeds,success_threshold,success_share,chance,untrained,ci_low,ci_high,ci_coverage,"
         "position_free\n";
  auto csv_row = [&](const Line& line, const std::string& length, bool beyond, const Aggregate& g, double chance,
                     bool untrained, double free) {
    csv << fmt::format("\"{}\",{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{:.6g},{},"
                       "{:.6g},{:.6g},{:.6g},{}\n",
                       line.group, line.method, line.train_min, line.train_max, length, beyond ? 1 : 0, a.metric,
                       a.aggregate, g.value, g.mean, g.std, g.median, g.q1, g.q3, g.min, g.max, g.n,
                       a.success >= 0 ? fmt::format("{}", a.success) : "",
                       a.success >= 0 ? fmt::format("{:.6g}", double(g.successes) / g.n) : "", chance,
                       untrained ? 1 : 0, g.ci_low, g.ci_high, g.coverage,
                       std::isfinite(free) ? fmt::format("{:.6g}", free) : std::string());
  };
  for (const auto& line : lines) {
    std::vector<std::string> cells = {several_methods ? line.group + " [" + line.method + "]" : line.group,
                                      fmt::format("{}-{}", line.train_min, line.train_max)};
    std::vector<std::string> chance_cells = {"  chance", ""}, free_cells = {"  position-free", ""};
    double beyond_chance = 0, beyond_free = 0;
    int64_t beyond_lengths = 0;
    for (int64_t L : lengths) {
      auto found = line.values.find(L);
      if (found == line.values.end()) {
        cells.push_back("");
        chance_cells.push_back("");
        free_cells.push_back("");
        continue;
      }
      const Aggregate g = aggregate_of(found->second, a);
      note_interval(g);
      const double chance = mean_of(line.chance.at(L));
      const bool in_summary =
          std::find(line.summary_lengths.begin(), line.summary_lengths.end(), L) != line.summary_lengths.end();
      std::string cell = format_cell(g, a, show_n) + (L > line.train_max ? "*" : "");
      auto untrained = line.untrained.find(L);
      if (untrained != line.untrained.end()) {
        cell += " !";
        for (const auto& text : untrained->second) untrained_schemes.insert(text.substr(0, text.find(':')));
      }
      cells.push_back(cell);
      chance_cells.push_back(metric_cell(chance, loss));
      const auto free_values = line.free.find(L);
      const double free = free_values == line.free.end() ? NAN : mean_of(free_values->second);
      free_cells.push_back(std::isfinite(free) ? metric_cell(free, loss) : "");
      if (in_summary) beyond_chance += chance, beyond_free += free, ++beyond_lengths;
      csv_row(line, std::to_string(L), L > line.train_max, g, chance, untrained != line.untrained.end(), free);
    }
    const Aggregate summary = aggregate_of(line.summary, a);
    note_interval(summary);
    cells.push_back(format_cell(summary, a, show_n));
    chance_cells.push_back(beyond_lengths ? metric_cell(beyond_chance / beyond_lengths, loss) : "");
    const double free_beyond = beyond_lengths ? beyond_free / beyond_lengths : NAN;
    free_cells.push_back(std::isfinite(free_beyond) ? metric_cell(free_beyond, loss) : "");
    if (summary.n > 0) csv_row(line, "beyond", true, summary, beyond_chance / beyond_lengths, false, free_beyond);
    table.push_back(cells);
    if (!one_chance) table.push_back(chance_cells);
    if (!one_free && !line.free.empty()) table.push_back(free_cells);
  }
  auto shared_row = [&](const std::string& name, std::map<int64_t, double>& shared) {
    std::vector<std::string> row = {name, ""};
    for (int64_t L : lengths) row.push_back(shared.count(L) ? metric_cell(shared[L], loss) : "");
    row.push_back("");
    table.push_back(row);
  };
  if (one_chance && !lines.empty()) shared_row("chance", shared_chance);
  if (one_free && !shared_free.empty()) shared_row("position-free", shared_free);

  const std::string what = a.metric == "token"      ? "per-token accuracy (%)"
                           : a.metric == "sequence" ? "per-sequence accuracy (%)"
                                                    : "loss (nats per scored token)";
  const std::string over = a.pool.empty() ? "seeds" : "seeds x " + join(a.pool, " x ");
  const std::string n = one_n ? fmt::format(" (n = {} in every cell)", *cell_ns.begin())
                               : a.success >= 0 ? std::string(" (n: the k/n)") : std::string(" (n)");
  const std::string how = a.aggregate == "median"      ? "median [interquartile range] over " + over + n
                          : a.aggregate == "median-ci" ? "median [order-statistic interval] over " + over + n
                          : a.aggregate == "max"       ? (loss ? "best (lowest) [highest] of the " + over + n
                                                               : "best of the " + over + " [worst]" + n)
                                                       : "mean +- std over " + over + n;
  std::vector<std::string> notes;
  notes.push_back(fmt::format("{}: {}, {}; {} of {} runs complete", described, what, how, complete, runs.size()));
  notes.push_back(fmt::format("rows at {}, positions {}{}{}", a.step >= 0 ? fmt::format("step {}", a.step) : "the final step",
                              a.sampler.empty() ? "as each run evaluated" : a.sampler,
                              a.sampler_max_length > 0 ? fmt::format(" (max_length {})", a.sampler_max_length) : "",
                              a.samples > 0 ? fmt::format(", {} samples", a.samples) : ""));
  std::set<std::vector<int64_t>> beyond_sets;  // the lengths each line's beyond averages
  for (const auto& line : lines)
    if (!line.summary_lengths.empty()) beyond_sets.insert(line.summary_lengths);
  std::string beyond_lengths = "";
  if (beyond_sets.size() == 1) {
    std::vector<std::string> texts;
    for (int64_t L : *beyond_sets.begin()) texts.push_back(std::to_string(L));
    beyond_lengths = ": " + join(texts);
  } else if (beyond_sets.size() > 1) {
    beyond_lengths = ", which differ between groups: the .csv file's beyond rows";
  }
  notes.push_back("* beyond the group's training lengths (trained); beyond: each seed's mean over those lengths "
                  "(the ones every seed has" + beyond_lengths + "), aggregated the same way");
  if (a.success >= 0)
    notes.push_back(fmt::format("k/n: seeds {} {}", loss ? "at or below" : "at or above",
                                loss ? fmt::format("{}", a.success) : fmt::format("{}%", 100 * a.success)));
  notes.push_back(a.metric == "sequence" ? "chance: the exact match of the input-independent prediction (the most "
                                          "frequent target, per position where the task scores positions apart; "
                                          "where whole sequences repeat, the most frequent one can score more)"
                                        : "chance: the best input-independent prediction");
  if (!shared_free.empty() || std::any_of(lines.begin(), lines.end(), [](const Line& l) { return !l.free.empty(); }))
    notes.push_back("position-free: what a model without positions gets on the same examples, whose output slots "
                    "it cannot tell apart: the input's most frequent symbol at every slot; a scheme generalizes only "
                    "above the stronger of it and chance");
  if (a.learned >= 0)
    notes.push_back(fmt::format("{} run(s) had not learned their training range ({} accuracy below {}% at "
                                "the longest training length evaluated): their values beyond it are left out{}",
                                not_learned.size(), a.learned_metric == "sequence" ? "per-sequence" : "per-token",
                                100 * a.learned,
                                not_learned.empty() ? "" : " (" + join(not_learned) + ")"));
  if (!intervals.empty()) {
    std::vector<std::string> each;
    bool below = false;
    for (const auto& [n, interval] : intervals) {
      each.push_back(fmt::format("n = {}: [x_({}), x_({})], {:.1f}%", n, interval.first, n + 1 - interval.first,
                                 100 * interval.second));
      below = below || n < kIntervalMinN;
    }
    notes.push_back(fmt::format("the interval: of the n values (seeds{}) sorted, [x_(k), x_(n+1-k)] with the largest k "
                                "that holds the median of their distribution with probability at least 95%{} ({})",
                                a.pool.empty() ? "" : " x pooled keys",
                                below ? fmt::format("; below {} values no interval does, and the range is given "
                                                    "with what it holds", kIntervalMinN)
                                      : "",
                                join(each)));
  }
  if (!untrained_schemes.empty())
    notes.push_back(fmt::format("!: some seed used position-table rows ({}) that no training step updated; which "
                                "rows: analysis/summarize_run.py RUN.h5",
                                join(std::vector<std::string>(untrained_schemes.begin(), untrained_schemes.end()))));
  if (without_rows > 0)
    notes.push_back(fmt::format("{} complete run(s) have no rows under these settings", without_rows));
  // groups whose every seed has the same values at the same lengths: a model that cannot tell
  // the groups' settings apart (a bidirectional one without positions sees reverse_string and
  // duplicate_string inputs alike), or the same runs twice
  std::vector<std::string> identical;
  for (size_t i = 0; i < lines.size(); ++i)
    for (size_t j = i + 1; j < lines.size(); ++j)
      if (lines[i].method == lines[j].method && lines[i].seeds.size() > 1 && lines[i].seeds == lines[j].seeds &&
          std::any_of(lines[i].seeds.begin(), lines[i].seeds.end(), [](const auto& s) { return !s.empty(); }))
        identical.push_back(lines[i].group + " and " + lines[j].group);
  if (!identical.empty())
    notes.push_back(fmt::format("the same value in every seed and length: {} (their models cannot tell these "
                                "settings apart, e.g. a bidirectional encoder without positions sees the inputs "
                                "of reverse_string and duplicate_string alike)",
                                join(identical, "; ")));

  // text
  std::vector<size_t> width(header.size(), 0);
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& cells : table)
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  std::ostringstream text;
  text << notes.front() << "\n";
  auto text_row = [&](const std::vector<std::string>& cells) {
    std::string row = fmt::format("{:<{}}", cells[0], width[0]);
    for (size_t i = 1; i < cells.size(); ++i) row += fmt::format("  {:>{}}", cells[i], width[i]);
    text << row << "\n";
  };
  text_row(header);
  for (const auto& cells : table) text_row(cells);
  for (size_t i = 1; i < notes.size(); ++i) text << notes[i] << "\n";
  if (!problems.empty()) {
    text << problems.size() << " run(s) left out:\n";
    for (const auto& p : problems) text << p;
  }
  // markdown
  std::ostringstream md;
  md << join(notes, ". ") << ".\n\n| " << join(header, " | ") << " |\n|";
  for (size_t i = 0; i < header.size(); ++i) md << (i ? "---:|" : "---|");
  md << "\n";
  for (const auto& cells : table) md << "| " << join(cells, " | ") << " |\n";
  // LaTeX (booktabs)
  std::ostringstream tex;
  tex << "% " << join(notes, ". ") << "\n\\begin{tabular}{ll" << std::string(header.size() - 2, 'r') << "}\n\\toprule\n";
  auto tex_row = [&](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const auto& c : cells) escaped.push_back(latex_escape(c));
    tex << join(escaped, " & ") << " \\\\\n";
  };
  tex_row(header);
  tex << "\\midrule\n";
  for (const auto& cells : table) tex_row(cells);
  tex << "\\bottomrule\n\\end{tabular}\n";

  if (a.format == "markdown") out << md.str();
  else if (a.format == "csv") out << csv.str();
  else if (a.format == "latex") out << tex.str();
  else out << text.str();
  if (one_sweep) {
    try {
      update_sweep_index(a.paths.front(), runs);
    } catch (const std::exception& e) {
      err << "warning: could not write the sweep index: " << e.what() << "\n";
    }
  }
  if (out_dir.empty()) {
    if (a.format == "text") out << "(several inputs: --out DIR writes report.csv, report.md and report_runs.csv)\n";
    return problems.empty() ? 0 : 1;
  }
  // in the sweep directory each variant of the report has files of its own; --out DIR takes
  // the plain names
  const std::string stem = out_dir + "/" + (a.out_dir.empty() ? report_file_stem(a) : std::string("report"));
  try {
    std::filesystem::create_directories(out_dir);
    write_file_atomically(stem + ".csv", csv.str(), "the report");
    write_file_atomically(stem + ".md", md.str(), "the report");
    write_file_atomically(stem + "_runs.csv", per_run.str(), "the per-run values");
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  if (a.format == "text") out << "wrote " << stem << ".csv, " << stem << ".md, " << stem << "_runs.csv\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace pelab
