// Files that are either whole or absent: written under a temporary name, flushed to the
// disk, then renamed into place. A crash, a kill -9 or a full disk leaves the previous
// version (or nothing), never a partial file under the final name.
#pragma once

#include <string>

namespace pelab {

// The temporary name a file is written under before commit_file renames it.
std::string temporary_name(const std::string& final_path);

// fsyncs `temporary`, renames it to `final_path` and fsyncs the directory, so the rename
// survives a power loss. Throws std::runtime_error naming the file and the OS error.
void commit_file(const std::string& temporary, const std::string& final_path);

// Removes a temporary file when the write that owns it fails (the destructor runs before
// commit, or after a throw). Call release() after commit_file.
class TemporaryFileGuard {
 public:
  explicit TemporaryFileGuard(std::string path) : path_(std::move(path)) {}
  ~TemporaryFileGuard();
  void release() { path_.clear(); }
  TemporaryFileGuard(const TemporaryFileGuard&) = delete;
  TemporaryFileGuard& operator=(const TemporaryFileGuard&) = delete;

 private:
  std::string path_;
};

}  // namespace pelab
