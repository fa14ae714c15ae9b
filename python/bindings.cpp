// pelab._pelab: the C++ side of `import pelab` (python/pelab/__init__.py, docs/python.md).
// Every scheme, task, metric and check is pelab's own C++ (the CLI's code paths); this file
// only converts between Python objects and pelab's types.
#include <torch/extension.h>

#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <exception>
#include <iostream>
#include <regex>
#include <sstream>

#include "core/config/config.h"
#include "core/config/yaml_reader.h"
#include "core/encodings/registry.h"
#include "core/io/schema.h"
#include "core/kernels/blas_core.h"
#include "core/run/run.h"
#include "core/run/scheme_checks.h"
#include "core/run/trained_run.h"
#include "core/train/stop_signal.h"
#include "core/train/evaluator.h"
#include "data/task_registry.h"
#include "core/python/scheme_bridge.h"

namespace py = pybind11;

namespace pelab {
namespace {

// A YAML scalar as Python sees it: int, float, bool (true/false only: "on" and "off" are
// values of train.cuda_graphs) or str; quoted scalars stay str.
py::object scalar_to_python(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return py::str(text);
  static const std::regex integer(R"([-+]?[0-9]+)"), real(R"([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(text, integer)) return py::int_(std::stoll(text));
  if (std::regex_match(text, real)) return py::float_(std::stod(text));
  if (text == "true") return py::bool_(true);
  if (text == "false") return py::bool_(false);
  return py::str(text);
}

py::object yaml_to_python(const YAML::Node& node) {
  if (node.IsMap()) {
    py::dict d;
    for (const auto& item : node) d[py::str(item.first.as<std::string>())] = yaml_to_python(item.second);
    return std::move(d);
  }
  if (node.IsSequence()) {
    py::list l;
    for (const auto& item : node) l.append(yaml_to_python(item));
    return std::move(l);
  }
  if (node.IsScalar()) return scalar_to_python(node);
  return py::none();
}

py::object option_value(const OptionValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

py::list catalog_to_python(const Catalog& catalog) {
  py::list entries;
  for (const auto& entry : catalog) {
    py::list options;
    for (const auto& o : entry.options) {
      py::dict option;
      option["name"] = o.name;
      option["kind"] = o.kind_name();
      option["default"] = option_value(o.default_value);
      option["help"] = o.help;
      option["choices"] = o.choices;
      option["range"] = o.describe_range();
      options.append(option);
    }
    py::dict d;
    d["name"] = entry.name;
    d["description"] = entry.description;
    d["options"] = options;
    d["causal_only"] = entry.causal_only;
    d["formats"] = entry.formats;
    entries.append(d);
  }
  return entries;
}

// The resolved config (every default filled in) as YAML, from a file or from YAML text.
std::string resolve_config(const std::string& path, const std::string& text, const std::string& source,
                           const std::vector<std::string>& overrides) {
  const RunConfig config = text.empty()
                               ? load_run_config(path, overrides, scheme_catalog(), task_catalog(), "override")
                               : parse_run_config(text, source, overrides, scheme_catalog(), task_catalog(), "override");
  return to_yaml(config);
}

// While alive: SIGINT and SIGTERM stop a run as in the CLI (a checkpoint, then RunInterrupted);
// then Python's own handlers again.
class StopHandlerScope {
 public:
  StopHandlerScope() {
    clear_stop_request();
    sigaction(SIGINT, nullptr, &saved_int_);
    sigaction(SIGTERM, nullptr, &saved_term_);
    install_stop_handlers();
  }
  ~StopHandlerScope() {
    sigaction(SIGINT, &saved_int_, nullptr);
    sigaction(SIGTERM, &saved_term_, nullptr);
    clear_stop_request();
  }
  StopHandlerScope(const StopHandlerScope&) = delete;
  StopHandlerScope& operator=(const StopHandlerScope&) = delete;

 private:
  struct sigaction saved_int_ {}, saved_term_ {};
};

// Runs `work` without the GIL and with pelab's stop handlers; a stop becomes Python's
// KeyboardInterrupt carrying pelab's message (the checkpoint it wrote).
template <typename Work>
auto interruptible(Work work) {
  std::exception_ptr interrupted;
  std::string message;
  decltype(work()) result{};
  {
    py::gil_scoped_release release;
    StopHandlerScope handlers;
    try {
      result = work();
    } catch (const RunInterrupted& e) {
      message = e.what();
      interrupted = std::current_exception();
    }
  }
  if (interrupted) {
    PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
    throw py::error_already_set();
  }
  return result;
}

std::string train(const std::string& config_yaml, const std::vector<std::string>& overrides, bool resume,
                  bool quiet) {
  const RunConfig config = parse_run_config(config_yaml, "<config>", overrides, scheme_catalog(), task_catalog(),
                                            "override");
  return interruptible([&] {
    std::ostringstream discarded;
    std::ostream& log = quiet ? static_cast<std::ostream&>(discarded) : std::cout;
    const RunOutcome outcome = execute_run(config, log, false, resume);
    log.flush();
    return outcome.run_file;
  });
}

// A row under the run file's column names (core/io/schema.h), as pelab.results() reads them back.
py::dict evaluation_row(const EvalResult& r) {
  py::dict d;
  d[schema::kMethod] = r.method;
  d[schema::kLength] = r.length;
  d[schema::kSequenceLength] = r.sequence_length;
  d[schema::kSamples] = r.samples;
  d[schema::kLoss] = r.loss;
  d[schema::kPerTokenAccuracy] = r.per_token_accuracy;
  d[schema::kPerSequenceAccuracy] = r.per_sequence_accuracy;
  d[schema::kChanceTokenAccuracy] = r.chance_token_accuracy;
  d[schema::kChanceSequenceAccuracy] = r.chance_sequence_accuracy;
  d[schema::kChanceLoss] = r.chance_loss;
  d[schema::kPositionFreeTokenAccuracy] = r.position_free_token_accuracy;
  d[schema::kPositionFreeSequenceAccuracy] = r.position_free_sequence_accuracy;
  d[schema::kEvalStep] = r.step;
  d[schema::kEvalSampler] = r.sampler;
  d[schema::kEvalPositionsMaxLength] = r.positions_max_length;
  d[schema::kUntrained] = r.untrained;
  return d;
}

py::dict probe_row(const ProbeResult& p) {
  py::dict d;
  d[schema::kLength] = p.length;
  d[schema::kProbeLayer] = p.layer;
  d[schema::kPositionAccuracy] = p.position_accuracy;
  d[schema::kPositionChance] = p.position_chance;
  d[schema::kPositionR2] = p.position_r2;
  d[schema::kOrderAccuracy] = p.order_accuracy;
  d[schema::kDistanceR2] = p.distance_r2;
  d[schema::kMethod] = p.method;
  d[schema::kEvalStep] = p.step;
  d[schema::kEvalSampler] = p.sampler;
  d[schema::kEvalPositionsMaxLength] = p.positions_max_length;
  return d;
}

// A length a trained run's scheme cannot encode, as the same ConfigError from every method: the
// scheme's advice to raise an option is for a config to train, not for this trained run.
[[noreturn]] void refuse_length(const std::string& message) {
  const auto advice = message.find("; raise encoding.");
  throw ConfigError(advice == std::string::npos
                        ? message
                        : message.substr(0, advice) + ": beyond what this trained run can encode (a run trained with "
                                                      "a larger " + message.substr(advice + 8, message.find_first_of(" ", advice + 8) - advice - 8) +
                                                      " could)");
}

// A trained run (pelab.load): its model, evaluated as `pelab eval` evaluates it.
class LoadedRun {
 public:
  LoadedRun(const std::string& run_file, const std::string& device, int64_t threads, int64_t step)
      : run_(load_trained_run(
            run_file,
            [&](RunConfig& config) {
              config.device = device;
              config.threads = threads;
            },
            step)) {}

  std::string config_yaml() const { return to_yaml(run_.config); }
  int64_t step() const { return run_.step; }
  std::string device() const { return run_.prepared->device.str(); }
  int64_t sequence_length(int64_t length) const { return run_.prepared->task->sequence_length(length); }
  int64_t vocab_size() const { return run_.prepared->task->vocab_size(); }

  // tokens: (B, T) int64; positions: (B, T) int64 or float64 (None: 0..T-1); segments, padding: (B, T) or None
  py::dict forward(torch::Tensor tokens, std::optional<torch::Tensor> positions, const std::string& method,
                   std::optional<torch::Tensor> segments, std::optional<torch::Tensor> padding, bool attentions,
                   bool hidden_states, bool score_terms) {
    if (tokens.dim() != 2) throw ConfigError("tokens: expected (batch, length), got " + std::to_string(tokens.dim()) + " dimensions");
    const auto device = run_.prepared->device;
    tokens = tokens.to(device, torch::kInt64);
    const int64_t B = tokens.size(0), T = tokens.size(1);
    torch::Tensor position_tensor =
        positions ? positions->to(device) : torch::arange(T, torch::TensorOptions(torch::kInt64).device(device)).expand({B, T});
    if (position_tensor.sizes() != tokens.sizes())
      throw ConfigError("positions: expected the shape of tokens (" + std::to_string(B) + ", " + std::to_string(T) + ")");
    if (!position_tensor.is_floating_point()) position_tensor = position_tensor.to(torch::kInt64);
    else position_tensor = position_tensor.to(torch::kFloat64);
    const torch::Tensor segment_tensor = segments ? segments->to(device, torch::kInt64) : torch::Tensor();
    const torch::Tensor padding_tensor = padding ? padding->to(device, torch::kBool) : tokens.eq(kPadToken);
    try {
      run_.prepared->model->encoding().validate_positions(Positions(position_tensor, position_tensor));
    } catch (const c10::Error& e) {
      refuse_length(e.what_without_backtrace());
    }
    ForwardRequest request;
    request.attentions = attentions;
    request.hidden_states = hidden_states;
    Evaluator::Inspection inspection;
    {
      py::gil_scoped_release release;
      inspection = run_.evaluator->inspect(tokens, padding_tensor, Positions(position_tensor, position_tensor),
                                           segment_tensor, method, request, score_terms);
    }
    auto cpu = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat32); };
    py::dict out;
    out["logits"] = cpu(inspection.output.logits);
    std::vector<torch::Tensor> maps, states;
    for (const auto& a : inspection.output.attentions) maps.push_back(cpu(a));
    for (const auto& h : inspection.output.hidden_states) states.push_back(cpu(h));
    out["attentions"] = maps;
    out["hidden_states"] = states;
    py::list terms;
    for (const auto& layer : inspection.score_terms) {
      py::dict named;
      for (const auto& term : layer) named[py::str(term.name)] = cpu(term.value);
      terms.append(named);
    }
    out["score_terms"] = terms;
    return out;
  }

  // The first `count` examples of the evaluation set at `length`, with the positions evaluation gives them.
  py::dict examples(int64_t length, int64_t count) {
    auto [batch, positions] = run_.evaluator->evaluation_examples(
        length, count, evaluation_data_seed(run_.config.seed, length));
    auto cpu = [](const torch::Tensor& t) { return t.defined() ? py::cast(t.cpu()) : py::none(); };
    py::dict d;
    d["tokens"] = cpu(batch.tokens);
    d["positions"] = cpu(positions.key);
    d["targets"] = cpu(batch.targets);
    d["scored"] = cpu(batch.scored);
    d["padding"] = cpu(batch.padding);
    d["segments"] = cpu(batch.segments);
    return d;
  }

  py::list evaluate(std::vector<int64_t> lengths, int64_t samples, const std::string& method) {
    if (lengths.empty()) lengths = run_.config.eval.lengths;
    if (samples <= 0) samples = run_.config.eval.samples;
    RunConfig checked = run_.config;  // a length the scheme cannot take: the CLI's error
    checked.eval.lengths = lengths;
    checked.eval.extrapolation = {method};
    try {
      check_lengths_fit(checked, *run_.prepared->task, *run_.prepared->model);
    } catch (const LengthsDoNotFit& e) {
      refuse_length(e.what());
    }
    const auto rows = interruptible([&] {
      std::vector<EvalResult> results;
      for (int64_t length : lengths) results.push_back(run_.evaluator->evaluate_length(length, samples, method));
      return results;
    });
    py::list out;
    for (const auto& r : rows) out.append(evaluation_row(r));
    return out;
  }

  py::dict attention_maps(int64_t length, int64_t examples, const std::string& method) {
    AttentionMaps maps;
    {
      py::gil_scoped_release release;
      maps = run_.evaluator->attention_maps(length, examples, method);
    }
    py::dict d;
    d["length"] = maps.length;
    d["method"] = maps.method;
    d["step"] = maps.step;
    d["probs"] = maps.probs;
    d["tokens"] = maps.tokens;
    d["positions"] = maps.positions;
    d["term_names"] = maps.terms.names;
    d["term_mean_abs"] = maps.terms.mean_abs.defined() ? py::cast(maps.terms.mean_abs) : py::none();
    d["term_correlation"] = maps.terms.correlation.defined() ? py::cast(maps.terms.correlation) : py::none();
    return d;
  }

  py::list probes(int64_t length, const std::string& method) {
    std::vector<ProbeResult> rows;
    {
      py::gil_scoped_release release;
      rows = run_.evaluator->probes(length, method);
    }
    py::list out;
    for (const auto& p : rows) out.append(probe_row(p));
    return out;
  }

  // name -> tensor (CPU, detached copies): parameters, then buffers
  std::vector<std::pair<std::string, torch::Tensor>> state_dict() const {
    std::vector<std::pair<std::string, torch::Tensor>> items;
    for (const auto& p : run_.prepared->model->named_parameters()) items.emplace_back(p.key(), p.value().detach().cpu().clone());
    for (const auto& b : run_.prepared->model->named_buffers()) items.emplace_back(b.key(), b.value().detach().cpu().clone());
    return items;
  }

 private:
  TrainedRun run_;
};

}  // namespace
}  // namespace pelab

PYBIND11_MODULE(_pelab, m) {
  using namespace pelab;
  m.doc() = "pelab's C++ core (use the pelab package: docs/python.md)";
  // The CLI's errors, with its text: a config error (exit 2 in the CLI) is pelab.ConfigError.
  static py::exception<ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      config_error(e.what());
    } catch (const c10::Error& e) {  // LibTorch's what() carries a C++ backtrace: leave it out
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  install_python_scheme_loader(/*embedded=*/false);  // a config's `schemes:` load in this Python
  m.def("configure", [] { configure_cpu_math(); }, "the CLI's process-wide CPU settings");
  m.def("load_scheme_files", [](const std::vector<std::string>& files) { return load_scheme_files(files).size(); },
        "registers the schemes of Python files (as a config's schemes:)");
  m.def("openblas_core", &openblas_core, "the loaded OpenBLAS's kernels (core/kernels/blas_core.h)");
  m.def("better_openblas_core", &better_openblas_core, "the kernels the CLI runs instead of these, or ''");
  m.def("catalogs", [] {
    py::dict d;
    d["schemes"] = catalog_to_python(scheme_catalog());
    d["tasks"] = catalog_to_python(task_catalog());
    return d;
  });
  m.def("resolve_config", &resolve_config, py::arg("path"), py::arg("text"), py::arg("source"),
        py::arg("overrides"));
  m.def("check_scheme", [](const std::vector<std::string>& overrides, const std::vector<std::string>& files, bool causal,
                           bool randomized) {
    const RunConfig config = check_scheme_config(overrides, files);
    std::vector<SchemeCheck> checks;
    {
      py::gil_scoped_release release;  // a Python scheme's hooks take it
      checks = check_scheme(config, {causal, randomized, false});
    }
    py::list rows;
    for (const auto& c : checks) {
      py::dict row;
      row["property"] = c.property;
      row["measured"] = c.measured;
      row["passed"] = c.passed;
      row["skipped"] = c.skipped;
      row["note"] = c.note;
      rows.append(row);
    }
    return rows;
  }, py::arg("overrides"), py::arg("files"), py::arg("causal"), py::arg("randomized"));
  m.def("causal_only", [](const std::string& name) {
    return find_entry(scheme_registry(), name, "position encoding").info.causal_only;
  });
  m.def("yaml_to_python", [](const std::string& text) { return yaml_to_python(YAML::Load(text)); });
  m.def("train", &train, py::arg("config_yaml"), py::arg("overrides"), py::arg("resume"), py::arg("quiet"));
  m.def("config_differences", &config_differences);
  py::class_<LoadedRun>(m, "Run")
      .def(py::init<const std::string&, const std::string&, int64_t, int64_t>(), py::arg("run_file"),
           py::arg("device"), py::arg("threads"), py::arg("step"))
      .def_property_readonly("config_yaml", &LoadedRun::config_yaml)
      .def_property_readonly("step", &LoadedRun::step)
      .def_property_readonly("device", &LoadedRun::device)
      .def("sequence_length", &LoadedRun::sequence_length)
      .def_property_readonly("vocab_size", &LoadedRun::vocab_size)
      .def("forward", &LoadedRun::forward, py::arg("tokens"), py::arg("positions"), py::arg("method"),
           py::arg("segments"), py::arg("padding"), py::arg("attentions"), py::arg("hidden_states"),
           py::arg("score_terms"))
      .def("examples", &LoadedRun::examples)
      .def("evaluate", &LoadedRun::evaluate)
      .def("attention_maps", &LoadedRun::attention_maps)
      .def("probes", &LoadedRun::probes)
      .def("state_dict", &LoadedRun::state_dict);
}
