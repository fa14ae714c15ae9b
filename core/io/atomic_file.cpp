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

// fsyncs a directory; file systems that cannot (EINVAL) are not an error.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(const std::string& path, const void* data, size_t size, const std::string& what) {
  const std::string temporary = path + ".tmp";
  auto fail = [&](int error, int fd) {
    if (fd >= 0) ::close(fd);
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot write " + what + " " + path + ": " + std::strerror(error));
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno, -1);
  const char* bytes = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno, fd);
    if (n == 0) fail(ENOSPC, fd);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno, fd);
  if (::close(fd) != 0) fail(errno, -1);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail(errno, -1);
  const auto parent = std::filesystem::path(path).parent_path();
  sync_directory(parent.empty() ? std::string(".") : parent.string());
}

}  // namespace pelab
