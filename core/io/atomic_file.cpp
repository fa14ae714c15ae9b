#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace pelab {

namespace {

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path + " to flush it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems (and /proc-like ones) do not support fsync on directories: not an error.
  if (rc != 0 && !(directory && (error == EINVAL || error == ENOTSUP)))
    throw std::runtime_error("cannot flush " + path + " to disk: " + std::strerror(error));
}

}  // namespace

std::string temporary_name(const std::string& final_path) { return final_path + ".tmp"; }

void commit_file(const std::string& temporary, const std::string& final_path) {
  fsync_path(temporary, false);
  if (std::rename(temporary.c_str(), final_path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + " to " + final_path + ": " + std::strerror(errno));
  const auto parent = std::filesystem::path(final_path).parent_path();
  fsync_path(parent.empty() ? std::string(".") : parent.string(), true);
}

TemporaryFileGuard::~TemporaryFileGuard() {
  if (!path_.empty()) std::remove(path_.c_str());
}

}  // namespace pelab
