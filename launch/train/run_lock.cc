#include "launch/train/run_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string utc_time(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

bool alive_here(const LockOwner& o) {
  if (o.host != host_name() || o.pid <= 0) return false;
  return ::kill(static_cast<pid_t>(o.pid), 0) == 0 || errno != ESRCH;
}

// The record in an open lock file; an empty or unreadable one is "no owner".
bool read_owner(int fd, LockOwner* o) {
  std::string text;
  char buf[512];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  for (const char* key : {"host", "pid", "started", "run_id"})
    if (!j.contains(key)) return false;  // not a record this tool wrote
  try {
    o->host = j.value("host", std::string("unknown"));
    o->pid = j.value("pid", int64_t{0});
    o->started = j.value("started", int64_t{0});
    o->run_id = j.value("run_id", std::string("?"));
  } catch (const nlohmann::json::exception&) {
    return false;  // edited by hand: no owner this file can name
  }
  return true;
}

}  // namespace

int lock_whole_file(int fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
  if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
  if (errno != EINVAL) return errno;
#endif
  return ::fcntl(fd, F_SETLK, &fl) == 0 ? 0 : errno;
}

bool read_lock_owner(const std::string& path, LockOwner* owner) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool found = read_owner(fd, owner);
  ::close(fd);
  return found;
}

OutputKind run_lock_kind() {
  return {"a run's lock file", [](const std::string& path) {
            LockOwner owner;
            std::error_code ec;
            return fs::file_size(path, ec) == 0 || read_lock_owner(path, &owner);
          }};
}

std::string metrics_lock_path(const std::string& metrics) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::absolute(metrics), ec);
  if (ec) resolved = fs::absolute(metrics).lexically_normal();
  return resolved.string() + ".lock";
}

std::string LockOwner::str() const {
  return "run " + run_id + " (host " + host + ", pid " + std::to_string(pid) + ", started " + utc_time(started) + ")";
}

std::string run_lock_path(const std::string& dir) { return (fs::path(dir) / ".performer-lock").string(); }

std::string new_run_id() {
  const uint64_t t = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::random_device rd;
  uint64_t h = mix64(t, static_cast<uint64_t>(::getpid()));
  h = mix64(h, std::hash<std::string>{}(host_name()));
  h = mix64(h, (static_cast<uint64_t>(rd()) << 32) | rd());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

namespace {

// The topmost missing folder on the way to `dir` ("" when `dir` exists).
std::string topmost_missing(const std::string& dir) {
  std::error_code ec;
  fs::path top;
  for (fs::path p = fs::absolute(dir).lexically_normal(); !p.empty(); p = p.parent_path()) {
    if (p.filename().empty()) continue;  // "a/b/" normalises to a trailing empty name
    if (fs::exists(fs::symlink_status(p, ec))) break;
    top = p;
    if (p == p.parent_path()) break;
  }
  return top.string();
}

}  // namespace

std::string require_writable_folder(const std::string& dir, const std::string& key) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  PF_REQUIRE(ConfigError, !fs::exists(st) || fs::is_directory(st),
             key << ": '" << dir << "' is not a folder (it is a file)");
  // A link to nothing: creating through it would make a folder wherever it
  // points (or fail with "File exists"); the user decides where that is.
  PF_REQUIRE(ConfigError, fs::exists(st) || !fs::is_symlink(fs::symlink_status(dir, ec)),
             key << ": '" << dir << "' is a symbolic link to '" << fs::read_symlink(dir, ec).string()
                 << "', which does not exist: create that folder, or point the link (or " << key
                 << ") elsewhere");
  const std::string top = topmost_missing(dir);
  fs::create_directories(dir, ec);
  PF_REQUIRE(ConfigError, !ec, key << ": cannot create the folder '" << dir << "': " << ec.message());
  // Checkpoints are written under a temporary name and renamed.
  const std::string probe = (fs::path(dir) / (".performer-probe-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  PF_REQUIRE(ConfigError, fd >= 0,
             key << ": cannot write in the folder '" << dir << "' (creating '" << probe << "': " << std::strerror(errno)
                 << ")");
  ::close(fd);
  ::unlink(probe.c_str());
  return top;
}

RunLock::RunLock(const std::string& path, const std::string& what, const std::string& run_id, std::string* note,
                 std::string made_folder)
    : path_(path), made_folder_(std::move(made_folder)), exceptions_(std::uncaught_exceptions()) {
  const std::string is_link = "it is a symbolic link (a run's lock file is never a link): remove it";
  // The name is judged as every output path is (data/output_path.h): a file
  // there that is neither empty (a lock released at a clean end) nor an owner
  // record is not a lock of this tool, and the record would replace it.
  const PathHolds there = path_holds(path_, run_lock_kind());
  PF_REQUIRE(ConfigError, there != PathHolds::Link,
             what << ": cannot open the lock file '" << path_ << "': " << is_link);
  if (there == PathHolds::Other) {
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    throw ConfigError(what + ": its lock file '" + path_ + "' exists and " +
                      (ec ? std::string("is not a regular file")
                          : "holds something else than a lock record (" + std::to_string(size) + " bytes)") +
                      ": refusing to write over it; move that file away, or give this run other paths");
  }
  // O_NOFOLLOW: a symbolic link made there since (to nothing, or to anything)
  // would make or lock a file wherever it points.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  PF_REQUIRE(ConfigError, fd_ >= 0,
             what << ": cannot open the lock file '" << path_
                  << "': " << (errno == ELOOP ? is_link : std::string(std::strerror(errno))));
  // The record is read once the lock is decided: held by us, it is what the
  // last owner left (empty after a clean end); refused, it names the owner.
  const int err = lock_whole_file(fd_);
  LockOwner previous;
  const bool had_owner = read_owner(fd_, &previous);
  if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP) {
    // No locks on this filesystem: the record alone decides.
    if (had_owner && (previous.host != host_name() || alive_here(previous))) {
      ::close(fd_);
      fd_ = -1;
      throw ConfigError(what + " belongs to " + previous.str() + " (this filesystem offers no locks (" +
                        std::strerror(err) + "), so the owner record in '" + path_ +
                        "' decides): wait for that run to end, or remove that file once it is known to have ended");
    }
    if (note)
      *note = "warning: " + what + ": the filesystem offers no locks (" + std::strerror(err) +
              "): only the owner record in '" + path_ + "' keeps a second run out";
  } else if (err != 0) {
    ::close(fd_);
    fd_ = -1;
    PF_REQUIRE(ConfigError, err == EACCES || err == EAGAIN,
               what << ": cannot lock '" << path_ << "': " << std::strerror(err));
    throw ConfigError(what + " is in use by " + (had_owner ? previous.str() : "another run") + " (lock '" + path_ +
                      "'): two runs there would mix their checkpoints and metrics; wait for it to end, or give "
                      "this run its own");
  } else if (had_owner && note) {
    *note = what + ": taking over the lock from " + previous.str() +
            ", which no longer holds it (it ended without releasing it: killed or crashed)";
  }
  const std::string record =
      nlohmann::json{
          {"host", host_name()}, {"pid", static_cast<int64_t>(::getpid())}, {"started", unix_now()}, {"run_id", run_id}}
          .dump() +
      "\n";
  const bool written = ::ftruncate(fd_, 0) == 0 &&
                       ::pwrite(fd_, record.data(), record.size(), 0) == static_cast<ssize_t>(record.size()) &&
                       ::fsync(fd_) == 0;
  if (!written) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(what + ": cannot write the owner record '" + path_ + "': " + std::strerror(e));
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // An empty record with the lock free: the folder's last run ended cleanly.
  if (::ftruncate(fd_, 0) == 0) ::fsync(fd_);
  // Released while an error unwinds the run: it failed.
  if (std::uncaught_exceptions() > exceptions_) remove_made_folder();
  ::close(fd_);
}

// After a failed run, when the lock's folder was made for it and the lock
// file is all it holds, the lock file and the folders made for it go: a run
// that fails before its first checkpoint (a bad checkpoint.init_from, a data
// error) leaves no empty checkpoint.dir behind.
void RunLock::remove_made_folder() const {
  if (made_folder_.empty()) return;
  const fs::path lock(path_), dir = fs::absolute(lock.parent_path()).lexically_normal();
  if (dir.string().rfind(made_folder_, 0) != 0) return;  // not below the folder made
  std::error_code ec;
  for (fs::directory_iterator e(dir, ec), end; !ec && e != end; e.increment(ec))
    if (e->path().filename() != lock.filename()) return;  // it holds something else: kept
  if (ec || !fs::remove(lock, ec)) return;
  // Up to the topmost folder made; fs::remove takes only empty ones.
  for (fs::path p = dir; fs::remove(p, ec) && p.string() != made_folder_; p = p.parent_path()) {
  }
}

}  // namespace pf
