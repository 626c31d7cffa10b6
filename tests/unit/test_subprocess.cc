// run_subprocess: a missing program, a non-zero exit with its output, a child
// killed by a signal, and a stop request, each reported with the command; a
// caller killed by SIGKILL takes the program and its children with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/subprocess.h"
#include "tests/support/error_message.h"

namespace pf {
namespace {

class SubprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pf_subprocess_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SubprocessOptions options(const char* what = "testing") const {
    SubprocessOptions o;
    o.log_path = dir_ + "/log";
    o.what = what;
    return o;
  }
  std::string dir_;
};

TEST_F(SubprocessTest, SuccessWritesTheLog) {
  run_subprocess({"sh", "-c", "echo out; echo err >&2"}, options());
  std::ifstream in(dir_ + "/log");
  std::string a, b;
  std::getline(in, a);
  std::getline(in, b);
  EXPECT_EQ(a + b, "outerr");
}

TEST_F(SubprocessTest, MissingProgramNamesTheCommand) {
  const std::string w = test::expect_error_of<SubprocessError>([&] {
    run_subprocess({"pf-no-such-program", "easy-linclust", "a b"}, options());
  });
  EXPECT_NE(w.find("testing: cannot run 'pf-no-such-program easy-linclust 'a b''"), std::string::npos) << w;
  EXPECT_NE(w.find("not found on PATH"), std::string::npos) << w;
  const std::string p = test::expect_error_of<SubprocessError>([&] { run_subprocess({dir_ + "/nothing"}, options()); });
  EXPECT_NE(p.find("'" + dir_ + "/nothing' not found or not executable"), std::string::npos) << p;
}

TEST_F(SubprocessTest, FailureQuotesTheEndOfTheOutput) {
  const std::string w = test::expect_error_of<SubprocessError>([&] {
    run_subprocess({"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do echo line$i; done; exit 3"}, options());
  });
  EXPECT_NE(w.find("exited with status 3"), std::string::npos) << w;
  EXPECT_NE(w.find("line14"), std::string::npos) << w;
  EXPECT_NE(w.find("line3\n"), std::string::npos) << w;  // the last 12 lines
  EXPECT_EQ(w.find("line2\n"), std::string::npos) << w;
}

TEST_F(SubprocessTest, KilledChildIsReportedWithItsSignal) {
  const std::string w = test::expect_error_of<SubprocessError>([&] {
    run_subprocess({"sh", "-c", "kill -9 $$"}, options());
  });
  EXPECT_NE(w.find("was killed by signal 9"), std::string::npos) << w;
}

TEST_F(SubprocessTest, StopRequestEndsTheChildGroup) {
  SubprocessOptions o = options();
  const auto start = std::chrono::steady_clock::now();
  o.stop_requested = [&] { return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300); };
  // The grandchild (sleep) is in the child's process group and goes too.
  const std::string w = test::expect_error_of<SubprocessStopped>([&] {
    run_subprocess({"sh", "-c", "sleep 60 & wait"}, o);
  });
  EXPECT_NE(w.find("stopped on request while running 'sh -c 'sleep 60 & wait''"), std::string::npos) << w;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// True while `pid` runs: it exists and is not a zombie waiting to be reaped.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

TEST_F(SubprocessTest, CallerKilledTakesTheProgramAndItsChildren) {
  // The caller: a process of its own that runs a program which starts a
  // grandchild, as an MMseqs2 workflow does, and writes both pids.
  const std::string script = "echo $$ > " + dir_ + "/program.tmp; mv " + dir_ + "/program.tmp " + dir_ +
                             "/program; sleep 60 & echo $! > " + dir_ + "/child.tmp; mv " + dir_ + "/child.tmp " +
                             dir_ + "/child; wait";
  const pid_t caller = ::fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    try {
      run_subprocess({"sh", "-c", script}, options());
    } catch (...) {
    }
    ::_exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(dir_ + "/child") && std::chrono::steady_clock::now() - start < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const pid_t program = read_pid(dir_ + "/program"), child = read_pid(dir_ + "/child");
  ASSERT_GT(program, 0);
  ASSERT_GT(child, 0);
  ASSERT_TRUE(running(program) && running(child));
  ::kill(caller, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  const auto killed = std::chrono::steady_clock::now();
  while ((running(program) || running(child)) && std::chrono::steady_clock::now() - killed < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running(program)) << "the program outlived its caller";
  EXPECT_FALSE(running(child)) << "the program's child outlived the caller";
  if (running(child)) ::kill(child, SIGKILL);
  if (running(program)) ::kill(program, SIGKILL);
}

TEST(CommandLine, QuotesWhatAShellWouldSplit) {
  EXPECT_EQ(command_line({"mmseqs", "easy-search", "a b", "it's", ""}), "mmseqs easy-search 'a b' 'it'\\''s' ''");
}

}  // namespace
}  // namespace pf
