#include "experiments/padding.h"

#include <fmt/format.h>

#include <fstream>

#include "core/analysis/padding.h"
#include "core/config/yaml_reader.h"
#include "core/io/hdf5_store.h"
#include "core/run/run.h"
#include "core/train/evaluator.h"

namespace pelab {

int command_padding(const PaddingArguments& a, std::ostream& out, std::ostream& err) {
  try {
    const RunRecord record = read_run_file(a.run_file);
    RunConfig config = stored_run_config(a.run_file, record.config_yaml);
    config.threads = 0;
    config.device = "cpu";
    config.train.cuda_graphs = "off";  // a run trained with cuda_graphs: on is measured on the CPU
    PreparedRun run = prepare_run(config);
    load_checkpoint(record, a.run_file, *run.model, -1);
    run.model->eval();
    const int64_t length = a.length > 0 ? a.length : config.train.max_length;
    run.task->check_length(length, false);
    Evaluator evaluator(config, run.model, *run.task, run.device);
    auto [batch, positions] = evaluator.evaluation_examples(length, a.examples, evaluation_data_seed(config.seed, length));
    const int64_t pad = a.pad > 0 ? a.pad : batch.tokens.size(1);
    std::vector<PaddingEffect> effects;
    try {
      effects = padding_effects(run.model, batch, positions, pad);
    } catch (const c10::Error& e) {  // e.g. a learned table shorter than the padded sequence
      throw std::runtime_error(fmt::format("length {} with {} padding tokens (--length, --pad): {}", length, pad,
                                           e.what_without_backtrace()));
    }
    out << fmt::format("{}: {} ({}), length {} ({} tokens) + {} padding, {} examples\n", a.run_file,
                       config.encoding.name, config.model.causal ? "causal" : "bidirectional", length,
                       batch.tokens.size(1), pad, batch.tokens.size(0));
    out << fmt::format("{:>8} {:>8} {:>18} {:>18} {:>20} {:>16}\n", "row", "mask", "max |logit change|",
                       "mean |logit change|", "changed predictions", "within rounding");
    std::ofstream csv;
    if (!a.csv.empty()) {
      csv.open(a.csv);
      if (!csv) throw std::runtime_error("cannot write " + a.csv);
      csv << "run,encoding,causal,length,pad,row,masked,max_logit_change,mean_logit_change,changed_predictions,"
             "largest_logit,within_rounding\n";
    }
    for (const auto& e : effects) {
      out << fmt::format("{:>8} {:>8} {:>18.3g} {:>18.3g} {:>19.2f}% {:>16}\n", e.row, e.masked ? "on" : "off",
                         e.max_logit_change, e.mean_logit_change, 100 * e.changed_predictions,
                         e.within_rounding ? "yes" : "no");
      if (csv.is_open())
        csv << fmt::format("{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{}\n", a.run_file, config.encoding.name,
                           config.model.causal, length, pad, e.row, e.masked, e.max_logit_change, e.mean_logit_change,
                           e.changed_predictions, e.largest_logit, e.within_rounding);
    }
    return 0;
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {  // LibTorch's what() carries a C++ backtrace: leave it out
    err << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace pelab
