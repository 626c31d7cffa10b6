#include "runtime/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "runtime/check.h"

namespace pf {

std::string temporary_output_path(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

bool file_in_use(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

bool is_stale_hdf5_temporary(const std::string& path, long pid) {
  long pid_max = 4194304;  // the kernel's ceiling, when /proc does not say
  if (std::FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
    if (std::fscanf(f, "%ld", &pid_max) != 1) pid_max = 4194304;
    std::fclose(f);
  }
  if (pid <= 0 || pid > pid_max || pid == ::getpid()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return false;
  char head[8] = {0};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  const bool hdf5 = n == 8 && std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0;
  const bool unwritten = std::all_of(head, head + n, [](char c) { return c == 0; });
  return (hdf5 || unwritten) && !file_in_use(path);
}

void claim_temporary(const std::string& tmp) {
  struct stat st {};
  if (::lstat(tmp.c_str(), &st) != 0) return;
  PF_REQUIRE(IoError, S_ISREG(st.st_mode) && !file_in_use(tmp),
             "the temporary file '" << tmp << "' exists and "
                                    << (S_ISREG(st.st_mode) ? "is open in another process" : "is not a file")
                                    << " (a process of this pid in another pid namespace writing the same output?): "
                                       "refusing to touch it");
  PF_REQUIRE(IoError, ::unlink(tmp.c_str()) == 0,
             "cannot remove the leftover temporary file '" << tmp << "': " << std::strerror(errno));
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  PF_REQUIRE(IoError, std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot rename '" << tmp << "' to '" << path << "': " << std::strerror(errno));
}

void write_then_rename(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temporary_output_path(path);
  claim_temporary(tmp);  // (outside the try: another's file is never removed)
  try {
    write(tmp);
    rename_into_place(tmp, path);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace pf
