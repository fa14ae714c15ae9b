#include "core/io/live_curve.h"

#include <fmt/format.h>

#include <cmath>

#include "core/io/atomic_file.h"
#include "core/io/schema.h"

namespace pelab {

namespace s = schema;

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
  text += "  \"training\": {" + json_array(s::kStep, curve.step, integer) + ", " +
          json_array(s::kLoss, curve.loss, number) + ", " + json_array(s::kAccuracy, curve.accuracy, number) + ", " +
          json_array(s::kLearningRate, curve.learning_rate, number) + ", " +
          json_array(s::kTokensPerSecond, curve.tokens_per_second, number) + ", " +
          json_array(s::kPhase, curve.phase, integer) + "},\n";
  const auto& e = evaluation_curve;
  auto column = [&](const std::string& name, auto value) { return json_array(name, e, value); };
  text += "  \"evaluation_curve\": {" +
          column(s::kMethod, [](const EvalResult& r) { return json_string(r.method); }) + ", " +
          column(s::kLength, [](const EvalResult& r) { return std::to_string(r.length); }) + ", " +
          column(s::kSequenceLength, [](const EvalResult& r) { return std::to_string(r.sequence_length); }) + ", " +
          column(s::kSamples, [](const EvalResult& r) { return std::to_string(r.samples); }) + ", " +
          column(s::kLoss, [](const EvalResult& r) { return json_number(r.loss); }) + ", " +
          column(s::kPerTokenAccuracy, [](const EvalResult& r) { return json_number(r.per_token_accuracy); }) + ", " +
          column(s::kPerSequenceAccuracy, [](const EvalResult& r) { return json_number(r.per_sequence_accuracy); }) +
          ", " + column(s::kEvalStep, [](const EvalResult& r) { return std::to_string(r.step); }) + ", " +
          column(s::kEvalSampler, [](const EvalResult& r) { return json_string(r.sampler); }) + ", " +
          column(s::kEvalPositionsMaxLength, [](const EvalResult& r) { return std::to_string(r.positions_max_length); }) +
          "}\n}\n";
  write_file_atomically(path, text, "the live training curve");
}

}  // namespace pelab
