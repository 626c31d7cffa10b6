// train.metrics: one JSON object per line, appended by rank 0 and flushed
// with each line. Every write is checked: a failed one (a full disk) is an
// IoError naming the file, the step and what is lost, which ends the run
// with exit status 1; the file is cut back to its last complete line. sync() flushes and fsyncs; the trainer calls it
// before each checkpoint, so after a crash the file holds at least every line up to the newest checkpoint (and a resume
// drops the lines past it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace pf {

class MetricsLog {
 public:
  MetricsLog() = default;  // closed: writes nothing
  // Opens (truncating unless `append`). ConfigError naming train.metrics
  // and the reason when the file cannot be made: checked before step 1.
  MetricsLog(const std::string& path, bool append);
  ~MetricsLog();
  MetricsLog(MetricsLog&& o) noexcept;
  MetricsLog& operator=(MetricsLog&& o) noexcept;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  bool is_open() const { return f_ != nullptr; }
  // Appends `line` and a newline, then flushes. `step` names what was lost.
  void write(const std::string& line, int64_t step);
  void sync(int64_t step);

 private:
  [[noreturn]] void fail(const char* what, int err, int64_t step);
  std::string path_;
  std::FILE* f_ = nullptr;
  int64_t lines_ = 0;   // written by this run
  long complete_ = -1;  // bytes of the file up to its last complete line
};

}  // namespace pf
