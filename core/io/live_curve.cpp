#include "core/io/live_curve.h"

#include <fmt/format.h>

#include <cmath>

#include "core/io/atomic_file.h"

namespace pelab {

namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c == '\n') out += "\\n";
    else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
    else out += char(c);
  }
  return out + "\"";
}

std::string json_number(double value) { return std::isfinite(value) ? fmt::format("{}", value) : "null"; }

// "name": [v, ...] of `rows`, each value made by `value(row)`
template <typename Rows, typename Value>
std::string json_array(const std::string& name, const Rows& rows, Value value) {
  std::string out = json_string(name) + ": [";
  for (size_t i = 0; i < rows.size(); ++i) out += (i ? ", " : "") + value(rows[i]);
  return out + "]";
}

}  // namespace

void write_live_curve(const std::string& path, const LiveCurve& run, const TrainingCurve& curve,
                      const std::vector<EvalResult>& evaluation_curve) {
  auto number = [](double v) { return json_number(v); };
  auto integer = [](int64_t v) { return std::to_string(v); };
  std::string text = "{\n";
  text += fmt::format("  \"run_name\": {},\n  \"config\": {},\n", json_string(run.run_name), json_string(run.config_yaml));
  text += fmt::format("  \"train_min_length\": {}, \"train_max_length\": {}, \"train_steps\": {},\n",
                      run.train_min_length, run.train_max_length, run.steps);
  text += fmt::format("  \"run_sampler\": {}, \"run_positions_max_length\": {},\n", json_string(run.run_sampler),
                      run.run_positions_max_length);
  text += "  \"training\": {" + json_array("step", curve.step, integer) + ", " +
          json_array("loss", curve.loss, number) + ", " + json_array("accuracy", curve.accuracy, number) + ", " +
          json_array("learning_rate", curve.learning_rate, number) + ", " +
          json_array("tokens_per_second", curve.tokens_per_second, number) + ", " +
          json_array("phase", curve.phase, integer) + "},\n";
  const auto& e = evaluation_curve;
  auto column = [&](const std::string& name, auto value) { return json_array(name, e, value); };
  text += "  \"evaluation_curve\": {" +
          column("method", [](const EvalResult& r) { return json_string(r.method); }) + ", " +
          column("length", [](const EvalResult& r) { return std::to_string(r.length); }) + ", " +
          column("sequence_length", [](const EvalResult& r) { return std::to_string(r.sequence_length); }) + ", " +
          column("samples", [](const EvalResult& r) { return std::to_string(r.samples); }) + ", " +
          column("loss", [](const EvalResult& r) { return json_number(r.loss); }) + ", " +
          column("per_token_accuracy", [](const EvalResult& r) { return json_number(r.per_token_accuracy); }) + ", " +
          column("per_sequence_accuracy", [](const EvalResult& r) { return json_number(r.per_sequence_accuracy); }) +
          ", " + column("step", [](const EvalResult& r) { return std::to_string(r.step); }) + ", " +
          column("sampler", [](const EvalResult& r) { return json_string(r.sampler); }) + ", " +
          column("positions_max_length", [](const EvalResult& r) { return std::to_string(r.positions_max_length); }) +
          "}\n}\n";
  write_file_atomically(path, text, "the live training curve");
}

}  // namespace pelab
