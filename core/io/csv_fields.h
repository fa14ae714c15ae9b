// The CSV of pelab's per-run files (pelab report's report_runs.csv): fields quoted where
// they hold commas, a quote inside doubled.
#pragma once

#include <string>
#include <vector>

namespace pelab {

// "text" with each " doubled
inline std::string quoted_csv(std::string text) {
  for (size_t at = 0; (at = text.find('"', at)) != std::string::npos; at += 2) text.insert(at, 1, '"');
  return "\"" + text + "\"";
}

// The fields of one CSV line: split at commas outside "..." (a doubled quote inside is one quote).
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) fields.emplace_back();
    else fields.back() += c;
  }
  return fields;
}

}  // namespace pelab
