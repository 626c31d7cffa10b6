// run_subprocess: a missing program, a non-zero exit with its output, a child
// killed by a signal, and a stop request, each reported with the command.
#include <gtest/gtest.h>
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

TEST(CommandLine, QuotesWhatAShellWouldSplit) {
  EXPECT_EQ(command_line({"mmseqs", "easy-search", "a b", "it's", ""}), "mmseqs easy-search 'a b' 'it'\\''s' ''");
}

}  // namespace
}  // namespace pf
