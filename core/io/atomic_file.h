// Files that are either whole or absent: written under a temporary name, flushed to the
// disk, then renamed into place. A crash, a kill -9 or a full disk leaves the previous
// version (or nothing), never a partial file under the final name. A failed write removes
// its temporary file; a kill -9 during one can leave `<name>.tmp`, which the next write
// replaces (and a sweep removes).
#pragma once

#include <cstddef>
#include <string>

namespace pelab {

// Writes `size` bytes to `path` + ".tmp", fsyncs it, renames it to `path` and fsyncs the
// directory (so the rename survives a power loss). On failure the temporary file is removed
// and std::runtime_error says "cannot write <what> <path>: <the OS error>".
void write_file_atomically(const std::string& path, const void* data, size_t size, const std::string& what);
// The same for text (a report, a list, a script).
inline void write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  write_file_atomically(path, text.data(), text.size(), what);
}

}  // namespace pelab
