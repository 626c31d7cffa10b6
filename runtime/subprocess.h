// Running an external program (MMseqs2) as a child process: argv is executed
// directly (no shell), its stdout and stderr go to a log file, and a failure
// becomes an error that names the command, how it ended and the end of the
// log. The program runs in a process group of its own under a small guardian
// process that holds the parent-death signal: when the caller dies, even by
// SIGKILL, the guardian kills the group, so neither the program nor anything
// it started outlives the caller. A stop request (SIGINT / SIGTERM flag of the
// caller) is polled while the child runs; the group then gets SIGTERM (the
// guardian ends it at once), and SIGKILL 5 s later if it is still there.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/errors.h"

namespace pf {

// The child could not be started, exited non-zero, or was killed.
class SubprocessError : public Error {
 public:
  explicit SubprocessError(const std::string& what) : Error(ErrorKind::Io, what) {}
};

// The caller's stop request ended the child.
class SubprocessStopped : public Error {
 public:
  explicit SubprocessStopped(const std::string& what) : Error(ErrorKind::Io, what) {}
};

struct SubprocessOptions {
  std::string log_path;                  // stdout + stderr of the child (truncated); required
  std::function<bool()> stop_requested;  // polled every 100 ms; may be empty
  std::string what;                      // "clustering" in messages; may be empty
};

// "mmseqs easy-linclust a b": argv joined by spaces, each word quoted when it
// holds a space or a shell character.
std::string command_line(const std::vector<std::string>& argv);

// The path of `program` as execvp would find it ("" when it is not found):
// a name with a '/' is checked as it is, else each PATH entry.
std::string find_program(const std::string& program);

// Runs argv[0] with argv and waits. Returns normally only on exit status 0.
void run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options);

// The last `max_lines` lines of a text file ("" when it cannot be read).
std::string tail_of_file(const std::string& path, int max_lines);

}  // namespace pf
