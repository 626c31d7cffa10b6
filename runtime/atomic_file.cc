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
#include <filesystem>

#include "runtime/check.h"

namespace pf {

std::string temporary_output_path(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

namespace {

// A record lock (fcntl: POSIX or open file description) on any byte of fd's
// file that would keep this open file description from writing: asked, not
// taken.
bool record_locked(int fd) {
  struct flock query {};
  query.l_type = F_WRLCK;
  query.l_whence = SEEK_SET;  // start 0, length 0: the whole file
  return ::fcntl(fd, F_OFD_GETLK, &query) == 0 && query.l_type != F_UNLCK;
}

// A flock held by another open file description: probed by taking it for a
// moment. Another process probing at the same instant looks the same, so a
// refusal is tried again after pauses that differ between processes.
bool flocked(int fd) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::flock(fd, LOCK_UN);
      return false;
    }
    if (errno != EWOULDBLOCK) return false;
    ::usleep(static_cast<useconds_t>(1000 * (1 + attempt) + 97 * (::getpid() % 29)));
  }
  return true;
}

}  // namespace

bool file_in_use(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = record_locked(fd) || flocked(fd);
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

Destination Destination::of(const std::string& path) {
  Destination d;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return d;
  d.exists = true;
  d.dev = static_cast<uint64_t>(st.st_dev);
  d.ino = static_cast<uint64_t>(st.st_ino);
  d.size = static_cast<int64_t>(st.st_size);
  d.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return d;
}

TemporaryFile::TemporaryFile(const std::string& path, std::optional<Destination> expected)
    : final_(path), tmp_(temporary_output_path(path)), expected_(expected) {
  claim_temporary(tmp_);
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  PF_REQUIRE(IoError, fd_ >= 0,
             "cannot create '" << tmp_ << "' (the temporary file of '" << path << "'): " << std::strerror(errno));
  struct flock hold {};
  hold.l_type = F_RDLCK;
  hold.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_OFD_SETLK, &hold) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    ::close(fd_);
    fd_ = -1;
    throw IoError("cannot lock the temporary file '" + tmp_ + "': " + std::strerror(err));
  }
}

TemporaryFile::~TemporaryFile() {
  if (!committed_ && !kept_) ::unlink(tmp_.c_str());  // while the lock still says it is this writer's
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// After a rename: the folder's entry reaches the disk too. Best effort: some
// filesystems refuse to fsync a folder, and the file itself is already safe.
void fsync_folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  PF_REQUIRE(IoError, fd >= 0, "cannot open '" << folder << "' to flush it to disk");
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void TemporaryFile::commit(Flush flush) {
  if (flush == Flush::ToDisk)
    PF_REQUIRE(IoError, ::fsync(fd_) == 0, "fsync of '" << tmp_ << "' failed: " << std::strerror(errno));
  if (expected_) {
    auto refuse = [&](const std::string& why) {
      kept_ = true;
      throw IoError("'" + final_ + "' " + why + " while this run worked: it was not replaced; this run's result is in '" +
                    tmp_ + "' (rename it yourself)");
    };
    if (!expected_->exists) {
      // Taken only if still free, in one step.
      if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_.c_str(), RENAME_NOREPLACE) == 0) {
        committed_ = true;
        if (flush == Flush::ToDisk) fsync_folder_of(final_);
        return;
      }
      if (errno == EEXIST) refuse("was created by another process");
      PF_REQUIRE(IoError, errno == EINVAL || errno == ENOSYS,  // a filesystem without RENAME_NOREPLACE
                 "cannot rename '" << tmp_ << "' to '" << final_ << "': " << std::strerror(errno));
      if (Destination::of(final_).exists) refuse("was created by another process");
    } else {
      if (Destination::of(final_) != *expected_) refuse("was replaced, changed or removed by another process");
      if (file_in_use(final_)) refuse("was opened by another process (it holds the file's lock)");
    }
  }
  rename_into_place(tmp_, final_);
  committed_ = true;
  if (flush == Flush::ToDisk) fsync_folder_of(final_);
}

}  // namespace pf
