// train.metrics: one JSON object per line, appended by rank 0 and flushed
// with each line, each carrying the run_id of the run that wrote it. Every
// write is checked: a failed one (a full disk) is an IoError naming the file,
// the step and what is lost, which ends the run with exit status 1; the file
// is cut back to its last complete line. sync() flushes and fsyncs; the
// trainer calls it before each checkpoint, so after a crash the file holds at
// least every line up to the newest checkpoint (and a resume drops the lines
// past it).
//
// The file is never one the run did not create or continue
// (docs/checkpoints.md#outputs): before step 1 rank 0 claims it (the
// constructor) and then starts it (start()); every refusal is a ConfigError
// naming train.metrics, its value and the reason, with the file unchanged.
//
// It is not a ReplaceableOutput (data/replaceable_output.h), which replaces a
// finished file in one rename: the log grows line by line for the whole run,
// readable (and durable up to the newest checkpoint) while the run goes on,
// a resume continues the same file, and the lock that keeps a second run out
// is held on its inode, which a rename would change. The lines a resume
// drops are kept beside it in a ReplaceableOutput.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/paths.h"

namespace pf {

class MetricsLog {
 public:
  MetricsLog() = default;  // closed: writes nothing
  // Claims `path`: refused when it is, through any symbolic or hard link
  // (compared by device and inode), one of `guarded` (the run's inputs,
  // checkpoints, their folder, lock files), or not a regular file. Then
  // opens it (created when missing, never truncated) and takes an exclusive
  // lock on the file itself, so that a run reaching a live run's file under
  // another name is refused; `owner_record` is the lock file
  // (metrics_lock_path) whose record names the holder in that message.
  MetricsLog(const std::string& path, const std::vector<GuardedPath>& guarded, const std::string& owner_record);
  // Closes the file; one that this run created and never wrote is removed.
  ~MetricsLog();
  MetricsLog(MetricsLog&& o) noexcept;
  MetricsLog& operator=(MetricsLog&& o) noexcept;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Starts the log of run `run_id` at `step` (the step it resumed from, or 0).
  // At step 0 the file must be empty: a fresh run never truncates lines it
  // did not write (another run's, or a file that is no metrics file). A
  // resumed run appends to a file whose every line is a metrics record of
  // `run_id` (or of no run: written before records carried one), after
  // dropping the lines past `step` and a last line cut short by a crash,
  // which it keeps in "<file>.dropped-after-<step>[-K]" (dropped_to());
  // returns how many it dropped.
  int64_t start(int64_t step, const std::string& run_id);
  const std::string& dropped_to() const { return dropped_to_; }
  bool is_open() const { return f_ != nullptr; }
  // Appends `record` with this run's run_id as one line, then flushes. `step`
  // names what was lost.
  void write(nlohmann::json record, int64_t step);
  void sync(int64_t step);

 private:
  [[noreturn]] void fail(const char* what, int err, int64_t step);
  void close_file() noexcept;
  void swap(MetricsLog& o) noexcept;
  std::string path_;
  std::string what_;    // "train.metrics = 'm.jsonl'", for messages
  std::string dropped_to_;  // where start() kept the lines it dropped ("" when none)
  std::string run_id_;  // written on every line
  int fd_ = -1;         // holds the lock; owned by f_ once started
  std::FILE* f_ = nullptr;
  bool created_ = false;  // by this run, in the constructor
  int64_t lines_ = 0;     // written by this run
  long complete_ = -1;    // bytes of the file up to its last complete line
};

}  // namespace pf
