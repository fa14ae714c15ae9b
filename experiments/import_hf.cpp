#include "experiments/import_hf.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/config/config.h"
#include "core/run/run.h"

namespace pelab {

int command_import_hf(const ImportHfArguments& arguments, std::ostream& out, std::ostream& err) {
  HfImport imported;
  try {
    imported = import_hf_checkpoint(arguments.dir, arguments.options);
  } catch (const std::invalid_argument& e) {  // ConfigError is one
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  try {
    if (std::filesystem::exists(imported.run_file) && !arguments.force) {
      err << "error: " << imported.run_file << " exists; pass --force to replace it, or --out another folder\n";
      return 2;
    }
    check_output_writable(std::filesystem::path(imported.run_file).parent_path().string());
    write_run_file(imported.run_file, imported.record);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  out << fmt::format("imported {} tensors of {} into run '{}' ({} parameters)\n", imported.imported.size(),
                     arguments.dir, imported.record.run_name, imported.record.parameter_counts.at("total"));
  for (const auto& line : imported.skipped) out << "  not imported: " << line << "\n";
  out << "run file: " << imported.run_file << "\n"
      << "next: pelab eval " << imported.run_file << " (the lengths of its config), --probes, --attention-lengths\n";
  return 0;
}

}  // namespace pelab
