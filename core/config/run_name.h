// Run names with placeholders: `name: text-causal_lm-{encoding.name}` names the run by the
// resolved value of each key in braces (parse_run_config expands them).
#pragma once

#include <string>
#include <vector>

namespace pelab {

// The keys `name` refers to in braces, in order; `pelab train --set` of one of them adds
// nothing more to the name (the placeholder already says it).
std::vector<std::string> name_template_keys(const std::string& name);

}  // namespace pelab
