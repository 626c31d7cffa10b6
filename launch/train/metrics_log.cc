#include "launch/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "data/replaceable_output.h"
#include "launch/train/run_lock.h"
#include "runtime/check.h"

namespace pf {

namespace fs = std::filesystem;

namespace {

// A complete line of a metrics file: a JSON object with an integer "step",
// or with an "eval" object that has one. Its step and run_id ("" when it
// has none: written before lines carried it); false for any other line.
bool parse_record(const std::string& line, int64_t* step, std::string* run_id) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return false;
  const nlohmann::json& r = j.contains("eval") ? j["eval"] : j;
  if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) return false;
  *step = r["step"].get<int64_t>();
  const auto id = j.find("run_id");
  *run_id = id != j.end() && id->is_string() ? id->get<std::string>() : "";
  return true;
}

// The start of a line, for messages.
std::string excerpt(const std::string& line) { return line.size() <= 60 ? line : line.substr(0, 60) + "..."; }

// What the first line of a file says it is, for the refusal of a fresh run.
std::string first_line_says(const std::string& text) {
  int64_t step = 0;
  std::string run_id;
  if (!parse_record(text.substr(0, text.find('\n')), &step, &run_id))
    return "it is not a metrics file: its first line is '" + excerpt(text.substr(0, text.find('\n'))) + "'";
  return run_id.empty() ? "metrics of a run that did not record its run id" : "metrics of run " + run_id;
}

std::string read_all(int fd, const std::string& what) {
  std::string text;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    PF_REQUIRE(IoError, n >= 0, what << ": cannot read it: " << std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return text;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, const std::vector<GuardedPath>& guarded,
                       const std::string& owner_record)
    : path_(path), what_("train.metrics = '" + path + "'") {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec);
  if (!ec && resolved != fs::absolute(path).lexically_normal()) what_ += " (the file '" + resolved.string() + "')";
  auto require_unguarded = [&](const FileIdentity& id) {
    const GuardedPath* g = find_same_file(id, guarded);
    PF_REQUIRE(ConfigError, g == nullptr,
               what_ << " is " << g->what << " ('" << g->path
                     << "'): the metrics would be written over it. Name a file of this run's own");
  };
  FileIdentity id;
  if (file_identity(path, &id)) require_unguarded(id);
  PF_REQUIRE(ConfigError, !fs::is_directory(path), what_ << " is a folder: name a file");
  // Any run's lock file, not only this run's (listed in `guarded`): another
  // run empties its own lock record when it starts and ends.
  const std::string name = fs::path(path).filename().string();
  PF_REQUIRE(ConfigError,
             name != ".performer-lock" && !(name.size() > 5 && name.compare(name.size() - 5, 5, ".lock") == 0),
             what_ << " names a lock file (.performer-lock or *.lock), which a run rewrites: name a file of this "
                      "run's own");
  PF_REQUIRE(ConfigError, fs::exists(fs::status(path, ec)) || !fs::is_symlink(fs::symlink_status(path, ec)),
             what_ << " is a symbolic link to '" << fs::read_symlink(path, ec).string()
                   << "', which does not exist: name that file, or another one");
  fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd_ < 0 && errno == ENOENT) {
    fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    created_ = fd_ >= 0;
  }
  PF_REQUIRE(ConfigError, fd_ >= 0, what_ << ": cannot open it for writing: " << std::strerror(errno));
  try {
    struct stat st {};
    PF_REQUIRE(IoError, ::fstat(fd_, &st) == 0, what_ << ": cannot stat it: " << std::strerror(errno));
    PF_REQUIRE(ConfigError, S_ISREG(st.st_mode), what_ << " is not a regular file: name a file");
    require_unguarded({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
    const int err = lock_whole_file(fd_);
    if (err == EAGAIN || err == EACCES) {
      LockOwner owner;
      const bool named = read_lock_owner(owner_record, &owner);
      throw ConfigError(what_ + " is in use by " + (named ? owner.str() : "another run") +
                        " (it holds the lock on that file, which this path may reach through a symbolic or hard "
                        "link): two runs there would mix or truncate each other's metrics; wait for it to end, or "
                        "give this run its own train.metrics");
    }
    // Without locks on this filesystem the owner record alone decides (run_lock.h).
    PF_REQUIRE(ConfigError, err == 0 || err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP,
               what_ << ": cannot lock it: " << std::strerror(err));
  } catch (...) {
    close_file();  // and removed, when this run made it
    throw;
  }
}

MetricsLog::~MetricsLog() { close_file(); }

void MetricsLog::close_file() noexcept {
  if (f_ == nullptr && fd_ < 0) return;
  const int fd = f_ ? ::fileno(f_) : fd_;
  if (created_ && lines_ == 0) {
    // Nothing of this run's is in it: it goes, if the path still names it.
    struct stat mine {};
    FileIdentity there;
    if (::fstat(fd, &mine) == 0 && file_identity(path_, &there) &&
        there == FileIdentity{static_cast<uint64_t>(mine.st_dev), static_cast<uint64_t>(mine.st_ino)})
      ::unlink(path_.c_str());
  }
  if (f_)
    std::fclose(f_);
  else
    ::close(fd_);
  f_ = nullptr;
  fd_ = -1;
}

void MetricsLog::swap(MetricsLog& o) noexcept {
  std::swap(path_, o.path_);
  std::swap(what_, o.what_);
  std::swap(dropped_to_, o.dropped_to_);
  std::swap(run_id_, o.run_id_);
  std::swap(fd_, o.fd_);
  std::swap(f_, o.f_);
  std::swap(created_, o.created_);
  std::swap(lines_, o.lines_);
  std::swap(complete_, o.complete_);
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept { swap(o); }

MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  MetricsLog taken(std::move(o));
  swap(taken);  // the claim held so far ends with `taken`
  return *this;
}

int64_t MetricsLog::start(int64_t step, const std::string& run_id) {
  run_id_ = run_id;
  const std::string text = read_all(fd_, what_);
  PF_REQUIRE(ConfigError, text.empty() || step > 0,
             what_ << " already exists and holds " << text.size() << " bytes (" << first_line_says(text)
                   << "), and this run starts at step 0: it would replace them. A fresh run writes only a new or "
                      "empty file: move that one away, name another train.metrics, or resume the run that wrote "
                      "it (--resume auto with its checkpoint.dir)");
  // The lines a resume keeps: those up to `step`. The lines past it were
  // written after the checkpoint by the run that stopped; this run logs those
  // steps again. A last line without its newline was cut short by a crash.
  std::string kept, dropped_text;
  int64_t dropped = 0, number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    ++number;
    if (end == std::string::npos) {
      ++dropped;
      dropped_text += text.substr(at) + "\n";
      break;
    }
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    int64_t line_step = 0;
    std::string line_run;
    PF_REQUIRE(ConfigError, parse_record(line, &line_step, &line_run),
               what_ << ": line " << number << " is not a metrics record ('" << excerpt(line)
                     << "'): this is not the metrics file of the run being resumed, and a resume would rewrite "
                        "it. Name the file that run wrote, or a new one");
    PF_REQUIRE(ConfigError, line_run.empty() || line_run == run_id,
               what_ << ": line " << number << " holds the metrics of run " << line_run
                     << ", and this run continues run " << run_id
                     << ": a resume appends only to its own run's metrics. Name that run's file, or a new one");
    if (line_step > step) {
      ++dropped;
      dropped_text += line + "\n";
    } else {
      kept += line + "\n";
    }
  }
  if (dropped > 0) {
    // The dropped lines are kept beside the file first (a branch's steps,
    // whose checkpoints are set aside too, stay readable), never lost: on
    // the disk before the file is cut.
    dropped_to_ = path_ + ".dropped-after-" + std::to_string(step);
    for (int k = 1; fs::exists(fs::symlink_status(dropped_to_)); ++k)
      dropped_to_ = path_ + ".dropped-after-" + std::to_string(step) + "-" + std::to_string(k);
    const OutputKind dropped_lines{"the dropped lines of a metrics file", [](const std::string&) { return false; }};
    ReplaceableOutput(what_ + ": the dropped lines", dropped_to_, dropped_lines)
        .write(
            [&](const std::string& tmp) {
              std::ofstream out(tmp, std::ios::binary);
              out << dropped_text;
              out.close();
              PF_REQUIRE(IoError, out.good(), what_ << ": cannot keep the dropped lines in '" << tmp << "'");
            },
            ReplaceableOutput::Flush::ToDisk);
    // Usually the dropped lines are the file's end, which is cut off in place;
    // otherwise the kept lines are written again from the start. The file
    // keeps its inode, and with it the lock.
    const bool prefix = text.compare(0, kept.size(), kept) == 0;
    bool ok = ::ftruncate(fd_, prefix ? static_cast<off_t>(kept.size()) : 0) == 0;
    if (ok && !prefix) ok = ::write(fd_, kept.data(), kept.size()) == static_cast<ssize_t>(kept.size());
    PF_REQUIRE(IoError, ok && ::fsync(fd_) == 0,
               what_ << ": dropping the lines past step " << step << " failed: " << std::strerror(errno));
  }
  f_ = ::fdopen(fd_, "a");
  PF_REQUIRE(IoError, f_ != nullptr, what_ << ": cannot open it for writing: " << std::strerror(errno));
  std::fseek(f_, 0, SEEK_END);
  complete_ = std::ftell(f_);
  return dropped;
}

void MetricsLog::fail(const char* what, int err, int64_t step) {
  // The part of a line that reached the file is cut off (shrinking needs no
  // space), so the file ends with its last complete line; then it is closed
  // and not written to again.
  const int fd = ::fileno(f_);
  const bool cut = complete_ >= 0 && ::ftruncate(fd, complete_) == 0;
  std::fclose(f_);
  f_ = nullptr;
  fd_ = -1;
  std::ostringstream os;
  os << "train.metrics '" << path_ << "': " << what << " failed (" << std::strerror(err) << ") at step " << step
     << ": its line and any later ones are lost (" << lines_ << " line(s) of this run were written"
     << (cut ? "" : "; the last may be cut short")
     << "). Training stops; the checkpoints saved so far are intact, and a resume drops the metrics past the "
        "checkpoint it resumes from";
  throw IoError(os.str());
}

void MetricsLog::write(nlohmann::json record, int64_t step) {
  if (!f_) return;
  record["run_id"] = run_id_;
  const std::string line = record.dump();
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fputc('\n', f_) == EOF)
    fail("writing", errno ? errno : EIO, step);
  if (std::fflush(f_) != 0) fail("writing", errno ? errno : EIO, step);
  ++lines_;
  complete_ += static_cast<long>(line.size()) + 1;
}

void MetricsLog::sync(int64_t step) {
  if (!f_) return;
  if (std::fflush(f_) != 0) fail("flushing", errno ? errno : EIO, step);
  if (::fsync(::fileno(f_)) != 0 && errno != EINVAL) fail("fsync", errno, step);
}

}  // namespace pf
