// Config fuzzing: every shipped config, mutated line by line (wrong types, missing keys,
// huge and negative numbers, unknown names and keys, deep nesting, invalid YAML), must give
// either a valid config or a clean `file:line:col: message` ConfigError, never another
// exception, a crash or a hang.
#include "tests/catch.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/config/yaml_reader.h"
#include "tests/support.h"

using namespace pelab;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Every single-line mutation of a config text, but of lines `seen` in an earlier file (the
// shipped configs share most of their model and train lines: each distinct line is fuzzed once).
std::vector<std::string> mutations(const std::string& text, std::set<std::string>& seen) {
  const std::vector<std::string> values = {
      "\"text\"", "[1, 2]", "{a: 1}", "-1", "-99999999999", "1e400", "99999999999999999999", "0", "0.5",
      "null", "unknown_name", "true", "[]", "{}", "'", std::string(200, '[') + std::string(200, ']')};
  const auto lines = lines_of(text);
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const auto colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    if (!seen.insert(line).second) continue;
    for (const auto& v : values) {  // replace the value
      auto changed = lines;
      changed[i] = line.substr(0, colon + 1) + " " + v;
      out.push_back(joined(changed));
    }
    auto removed = lines;  // a missing key
    removed.erase(removed.begin() + i);
    out.push_back(joined(removed));
    auto renamed = lines;  // an unknown key
    renamed[i] = line.substr(0, colon) + "_typo" + line.substr(colon);
    out.push_back(joined(renamed));
    for (const char* noise : {"\t", " [", ": :", "- "}) {  // invalid YAML
      auto broken = lines;
      broken[i] = noise + line;
      out.push_back(joined(broken));
    }
  }
  return out;
}

}  // namespace

CATCH_TEST_CASE("config fuzzing: every mutation of a shipped config is a clean error or a valid config", "[config][fuzz]") {
  std::vector<std::string> files = {"configs/quickstart.yaml"};
  for (const char* folder : {"configs/tasks", "configs/text"})
    for (const auto& entry : std::filesystem::directory_iterator(test::source_path(folder)))
      files.push_back(std::string(folder) + "/" + entry.path().filename().string());
  const std::regex located(R"(^fuzz\.yaml:[0-9]+:[0-9]+: .+)");
  int64_t tried = 0, valid = 0, errors = 0;
  std::set<std::string> seen;
  for (const auto& file : files) {
    std::ifstream in(test::source_path(file));
    std::stringstream text;
    text << in.rdbuf();
    for (const auto& mutated : mutations(text.str(), seen)) {
      ++tried;
      try {
        RunConfig config = parse_run_config(mutated, "fuzz.yaml", {}, scheme_catalog(), task_catalog());
        // a valid config survives its own YAML round trip
        parse_run_config(to_yaml(config), "again.yaml", {}, scheme_catalog(), task_catalog());
        ++valid;
      } catch (const ConfigError& e) {
        ++errors;
        if (!std::regex_search(std::string(e.what()), located)) {
          CATCH_INFO(file << " mutated:\n" << mutated);
          CATCH_CHECK(std::string(e.what()) == "an error of the form fuzz.yaml:line:col: message");
        }
      } catch (const std::exception& e) {
        CATCH_INFO(file << " mutated:\n" << mutated);
        CATCH_FAIL("not a ConfigError: " << e.what());
      }
    }
  }
  CATCH_INFO(tried << " mutations: " << valid << " valid, " << errors << " errors");
  CATCH_CHECK(tried > 1000);
  CATCH_CHECK(errors > tried / 2);
  CATCH_CHECK(valid > 0);
}

CATCH_TEST_CASE("config fuzzing: 100,000 nested brackets are a clean error, not a stack overflow", "[config][fuzz]") {
  const std::string deep = "name: deep\nseed: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  CATCH_CHECK_THROWS_WITH(parse_run_config(deep, "deep.yaml", {}, scheme_catalog(), task_catalog()),
                          Catch::Matchers::StartsWith("deep.yaml:2:") && test::ContainsText("invalid YAML"));
}
