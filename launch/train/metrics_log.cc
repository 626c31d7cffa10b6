#include "launch/train/metrics_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>

#include "runtime/check.h"

namespace pf {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  PF_REQUIRE(ConfigError, f_ != nullptr,
             "train.metrics = '" << path << "': cannot open it for writing: " << std::strerror(errno));
  std::fseek(f_, 0, SEEK_END);
  complete_ = std::ftell(f_);
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept
    : path_(std::move(o.path_)), f_(std::exchange(o.f_, nullptr)), lines_(o.lines_), complete_(o.complete_) {}

MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    path_ = std::move(o.path_);
    f_ = std::exchange(o.f_, nullptr);
    lines_ = o.lines_;
    complete_ = o.complete_;
  }
  return *this;
}

void MetricsLog::fail(const char* what, int err, int64_t step) {
  // The part of a line that reached the file is cut off (shrinking needs no
  // space), so the file ends with its last complete line; then it is closed
  // and not written to again.
  const int fd = ::fileno(f_);
  const bool cut = complete_ >= 0 && ::ftruncate(fd, complete_) == 0;
  std::fclose(f_);
  f_ = nullptr;
  std::ostringstream os;
  os << "train.metrics '" << path_ << "': " << what << " failed (" << std::strerror(err) << ") at step " << step
     << ": its line and any later ones are lost (" << lines_ << " line(s) of this run were written"
     << (cut ? "" : "; the last may be cut short")
     << "). Training stops; the checkpoints saved so far are intact, and a resume drops the metrics past the "
        "checkpoint it resumes from";
  throw IoError(os.str());
}

void MetricsLog::write(const std::string& line, int64_t step) {
  if (!f_) return;
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
