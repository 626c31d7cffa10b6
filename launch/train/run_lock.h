// One run per folder: an exclusive lock on "<dir>/.performer-lock" (and on
// "<metrics>.lock" beside the file that train.metrics resolves to) with an
// owner record, taken by performer-train's rank 0 before it reads or writes
// anything there (docs/checkpoints.md#one-run-per-folder). The metrics file
// itself is locked too (metrics_log.h), so that a second name of it (a
// symbolic or hard link) finds it held.
//
// The lock is a POSIX record lock (fcntl F_SETLK) on the lock file: the
// kernel (or, on NFS, the lock manager) drops it when the process ends in any
// way, SIGKILL and crashes included. The file holds the owner record as one
// JSON line: host, pid, start time (Unix seconds) and run id. A second run
// finds the lock held and is refused with a ConfigError naming that owner. A
// record with the lock free is what a process that died left behind: the
// lock is taken over and the message says whose it was. Where the
// filesystem offers no locks at all (ENOLCK: NFS without a lock manager) the
// record alone decides: a live pid on this host, or any other host's record,
// refuses the run; a dead pid on this host is taken over.
//
// Why this is not a ReplaceableOutput (data/replaceable_output.h), the object
// every output file goes through: that one replaces one finished file in a
// single rename, while a RunLock is a run's claim on a folder (or a metrics
// file) for the whole of its life. The lock lives on the lock file's inode,
// so the record is rewritten in place and the file never renamed over: a
// rename would give the next run a fresh inode to lock while this run still
// holds the old one. What it shares with every output is the judgement of
// the path: path_holds (data/output_path.h) with run_lock_kind(), so a lock
// file is never a symbolic link and never someone else's file.
#pragma once

#include <cstdint>
#include <string>

#include "data/output_path.h"

namespace pf {

struct LockOwner {
  std::string host;
  int64_t pid = 0;
  int64_t started = 0;  // Unix seconds
  std::string run_id;
  std::string str() const;  // "run 1f2e... (host node1, pid 4242, started 2026-12-01 14:02:11 UTC)"
};

class RunLock {
 public:
  // Takes the lock file `path` (created when missing) for `run_id`.
  // ConfigError naming `what` ("checkpoint.dir = 'runs/x'"), the owner and
  // the reason when another live run holds it or the file cannot be written.
  // `note` receives a line when a dead owner's lock is taken over, or when
  // the filesystem has no locks.
  // `made_folder`: what require_writable_folder returned for the lock's
  // folder (the topmost folder it made, "" when the folder was there).
  RunLock(const std::string& path, const std::string& what, const std::string& run_id, std::string* note,
          std::string made_folder = {});
  // Clears the owner record, then releases the lock. Released while an
  // exception unwinds (the run failed), in a folder made for it
  // (made_folder) that holds nothing but the lock file, it removes the lock
  // file and the folders made: a run that fails at start-up leaves no empty
  // checkpoint.dir.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  void remove_made_folder() const;

  std::string path_;
  std::string made_folder_;  // the topmost folder made for this lock's folder, "" when none
  int fd_ = -1;
  int exceptions_ = 0;  // std::uncaught_exceptions() when taken
};

// The lock file of a folder ("<dir>/.performer-lock").
std::string run_lock_path(const std::string& dir);
// The lock file of train.metrics: "<file>.lock" beside the file the path
// resolves to (symbolic links followed), so every name that resolves to one
// file finds one owner record.
std::string metrics_lock_path(const std::string& metrics);
// An exclusive lock on the whole open file `fd` (an open-file-description
// lock where the kernel has them, so that two in one process conflict too,
// else a record lock), released when the file is closed: 0, or the errno
// (EAGAIN or EACCES: another holds it; ENOLCK: the filesystem has no locks).
int lock_whole_file(int fd);
// The owner record in the lock file `path`; false when there is none.
bool read_lock_owner(const std::string& path, LockOwner* owner);
// What may stand at a lock file's name (the output rule's OutputKind): an
// empty file (a lock released at a clean end) or an owner record.
OutputKind run_lock_kind();
// Creates `dir` when missing and checks that it takes new files (one made
// and removed). ConfigError naming `key`, the folder and the reason: a
// regular file of that name, no permission, a read-only filesystem. Returns
// the topmost folder it made ("" when `dir` was there), for the RunLock of
// that folder, which removes it after a failed run while it holds nothing.
std::string require_writable_folder(const std::string& dir, const std::string& key);
// 16 hex digits, distinct per process start (time, pid, host and the OS's
// random source).
std::string new_run_id();

}  // namespace pf
