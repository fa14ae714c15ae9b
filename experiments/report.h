// `pelab report`: a sweep's length-generalization table. Rows are groups (the runs that
// differ only by seed) and their extrapolation methods; columns are test lengths and a
// summary, the value over the lengths beyond each group's own training range (as Ruoss et
// al. 2023 report); each cell aggregates the seeds (mean, median or best) with its spread.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pelab {

struct ReportArguments {
  std::vector<std::string> paths;  // sweep directories and run files (run.h5), any mix
  std::string out_dir;             // where report.{csv,md} and report_runs.csv go (default: the
                                   //   sweep directory when one is given alone; else none)
  std::string metric = "token";      // token | sequence | loss
  std::string aggregate = "mean";    // mean (+- std) | median [interquartile range] | median-ci
                                     //   [order-statistic interval, >= 95% from 6 seeds] | max [min..max]
  double success = -1;               // >= 0: per cell, the share of seeds at or above this accuracy
                                     //   (a fraction; loss: at or below)
  std::string format = "text";       // what is printed: text | markdown | csv | latex
  std::string sort = "none";         // none | summary (best first)
  std::vector<std::string> pool;     // axis keys pooled with the seeds (a line's samples: seeds x
                                     //   their values), e.g. train.learning_rate: max then gives
                                     //   Ruoss et al.'s best over seeds and learning rates
  double learned = -1;               // >= 0: a run whose accuracy at its longest evaluated training
                                     //   length (in learned_metric) is below this (a fraction) has
                                     //   not learned its task: flagged, its values beyond training
                                     //   left out
  std::string learned_metric = "token";  // what --learned judges: "token" or "sequence" accuracy
  // Which of a run's evaluation rows (pelab eval adds rows under other settings): the method
  // (empty: each method a line), the step (-1: the final one), the sampler (empty: the
  // run's own) and its max length (0: the run's own, or any with --sampler), the samples (0:
  // the most there are).
  std::string method;
  int64_t step = -1;
  std::string sampler;
  int64_t sampler_max_length = 0;
  int64_t samples = 0;
};

// The name, without extension, of a report's files in its sweep directory: "report" with the
// default options, else "report" and each option that differs from its default, e.g.
// "report_aggregate-median_success-0.9", so that one variant never overwrites another.
std::string report_file_stem(const ReportArguments& arguments);

// Prints the table in `format` over the runs of the sweep directories and run files given
// (a lone run file's group is its run name), and writes report.csv, report.md and
// report_runs.csv (one row per run, method and test length, every value unaggregated) in
// out_dir (in the sweep directory: named by report_file_stem). Exit codes: 0, 1 when some run is not complete (left out) or a file cannot be
// written, 2 bad arguments.
int command_report(const ReportArguments& arguments, std::ostream& out, std::ostream& err);

}  // namespace pelab
