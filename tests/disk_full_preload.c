/* A full disk, simulated for the tests (LD_PRELOAD): once PELAB_FULL_BYTES bytes have been
 * written to files under the directory PELAB_FULL_DIR (an absolute, resolved path), every
 * further write there fails with ENOSPC, as on a full file system. Other files are left
 * alone. Covers write, pwrite, pwrite64 and writev (std::ofstream, HDF5's sec2 driver). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long budget = -1, written = 0;
static char full_dir[4096];
static size_t full_dir_length = 0;

static void read_settings(void) {
  static int done = 0;
  if (done) return;
  done = 1;
  const char* dir = getenv("PELAB_FULL_DIR");
  const char* bytes = getenv("PELAB_FULL_BYTES");
  if (!dir || !bytes) return;
  snprintf(full_dir, sizeof full_dir, "%s/", dir);
  full_dir_length = strlen(full_dir);
  budget = atoll(bytes);
}

/* -1 with errno = ENOSPC when a write of `count` bytes to `fd` does not fit the budget. */
static int charge(int fd, size_t count) {
  read_settings();
  if (budget < 0 || count == 0) return 0;
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  if (strncmp(target, full_dir, full_dir_length) != 0) return 0;
  if (written + (long long)count > budget) {
    errno = ENOSPC;
    return -1;
  }
  written += (long long)count;
  return 0;
}

typedef ssize_t (*write_function)(int, const void*, size_t);
typedef ssize_t (*pwrite_function)(int, const void*, size_t, off_t);
typedef ssize_t (*pwrite64_function)(int, const void*, size_t, off64_t);
typedef ssize_t (*writev_function)(int, const struct iovec*, int);

#define REAL(name, type) \
  static type real = NULL; \
  if (!real) real = (type)dlsym(RTLD_NEXT, name)

ssize_t write(int fd, const void* buffer, size_t count) {
  REAL("write", write_function);
  if (charge(fd, count) != 0) return -1;
  return real(fd, buffer, count);
}

ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
  REAL("pwrite", pwrite_function);
  if (charge(fd, count) != 0) return -1;
  return real(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t count, off64_t offset) {
  REAL("pwrite64", pwrite64_function);
  if (charge(fd, count) != 0) return -1;
  return real(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec* vectors, int n) {
  REAL("writev", writev_function);
  size_t count = 0;
  for (int i = 0; i < n; ++i) count += vectors[i].iov_len;
  if (charge(fd, count) != 0) return -1;
  return real(fd, vectors, n);
}
