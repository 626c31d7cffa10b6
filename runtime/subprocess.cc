// External programs as child processes: see subprocess.h.
#include "runtime/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/check.h"

namespace pf {

namespace {

// The guardian's SIGTERM: the caller died (parent-death signal) or asked the
// group to stop; the whole process group, the guardian included, ends now.
void kill_group(int) { ::kill(0, SIGKILL); }

// The child of run_subprocess, between fork and the program: it leads a new
// process group, forks the program into it and waits for it, ending as the
// program ended. It holds the parent-death signal, so when the caller dies
// (even by SIGKILL) it kills the group: the program and every process the
// program started (MMseqs2 workflows run their steps as child processes),
// which a parent-death signal on the program alone would leave running.
[[noreturn]] void guard_program(pid_t caller, char* const* args, int log, int report_write) {
  // A caller that takes its stop signals on a thread of its own blocks them
  // (launch/core/stop_signal.h); the guardian and the program begin, as any
  // program does, with none blocked.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setpgid(0, 0);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGTERM, kill_group);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != caller) kill_group(0);  // the caller died before the signal was set
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::dup2(log, 1);
  ::dup2(log, 2);
  const pid_t program = ::fork();
  if (program == 0) {
    ::signal(SIGTERM, SIG_DFL);
    ::execvp(args[0], args);
    const int e = errno;
    ssize_t ignored = ::write(report_write, &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  if (program < 0) {
    const int e = errno;
    ssize_t ignored = ::write(report_write, &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  ::close(report_write);  // the caller's read ends when the program's copy closes (exec or exit)
  int status = 0;
  while (::waitpid(program, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string describe_end(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// waitpid that retries on EINTR; false when the child is still running (WNOHANG).
bool reap(pid_t pid, int* status, int flags) {
  for (;;) {
    const pid_t r = ::waitpid(pid, status, flags);
    if (r == pid) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string find_program(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return is_executable_file(program) ? program : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

std::string tail_of_file(const std::string& path, int max_lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += "    " + l + "\n";
  return out;
}

void run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  PF_REQUIRE(ValueError, !argv.empty() && !argv[0].empty(), "run_subprocess: no program given");
  PF_REQUIRE(ValueError, !options.log_path.empty(), "run_subprocess: no log file given for '" << argv[0] << "'");
  const std::string cmd = command_line(argv);
  const std::string what = options.what.empty() ? std::string() : options.what + ": ";
  if (find_program(argv[0]).empty())
    throw SubprocessError(what + "cannot run '" + cmd + "': program '" + argv[0] + "' not found" +
                          (argv[0].find('/') == std::string::npos ? " on PATH" : "") + " or not executable");
  const int log = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0)
    throw SubprocessError(what + "cannot create the log file '" + options.log_path + "' for '" + cmd +
                          "': " + std::strerror(errno));
  int report[2];  // the child writes errno here when exec fails; closed by a successful exec
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(log);
    throw SubprocessError(what + "cannot start '" + cmd + "': pipe: " + std::strerror(e));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t caller = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(log);
    ::close(report[0]);
    ::close(report[1]);
    throw SubprocessError(what + "cannot start '" + cmd + "': fork: " + std::strerror(e));
  }
  if (pid == 0) guard_program(caller, args.data(), log, report[1]);
  ::setpgid(pid, pid);  // also here, so that the group exists before any kill below
  ::close(log);
  ::close(report[1]);
  int exec_errno = 0;
  ssize_t got;
  do got = ::read(report[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  ::close(report[0]);
  int status = 0;
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    reap(pid, &status, 0);
    throw SubprocessError(what + "cannot run '" + cmd + "': " + std::strerror(exec_errno));
  }
  bool stopped = false;
  auto stop_time = std::chrono::steady_clock::time_point{};
  bool killed = false;
  while (!reap(pid, &status, WNOHANG)) {
    if (!stopped && options.stop_requested && options.stop_requested()) {
      stopped = true;
      stop_time = std::chrono::steady_clock::now();
      ::kill(-pid, SIGTERM);
    }
    if (stopped && !killed && std::chrono::steady_clock::now() - stop_time > std::chrono::seconds(5)) {
      killed = true;
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (stopped)
    throw SubprocessStopped(what + "stopped on request while running '" + cmd + "' (it " + describe_end(status) + ")");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::string msg = what + "'" + cmd + "' " + describe_end(status) + "; the end of its output:\n";
  const std::string tail = tail_of_file(options.log_path, 12);
  msg += tail.empty() ? "    (empty)\n" : tail;
  throw SubprocessError(msg);
}

}  // namespace pf
