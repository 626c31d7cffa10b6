// performer-data end to end, as a user runs it: the executable in a child
// process. An output that is one of the inputs (by any spelling, a symbolic or
// a hard link) is refused with exit status 2 naming both, and the input is
// kept; SIGINT / SIGTERM during a real prepare (DB.fasta.gz, 20,000 sequences)
// remove the temporary file and exit with 128 + signal; a run killed with
// SIGKILL leaves its temporary file, which the next prepare of the same output
// removes (and says so); fractions that put every sequence in one split.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "data/h5.h"
#include "data/prepare.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

struct ToolRun {
  int status = -1;  // exit status, or -1 when ended by a signal
  int signal = 0;   // the signal that ended it, 0 when it exited
  std::string err;  // stdout and stderr
};

// Starts performer-data with `args`, stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv_s = {PF_DATA_TOOL};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stdout)) _exit(127);
    dup2(fileno(stdout), fileno(stderr));
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

ToolRun wait_for(pid_t pid, const std::string& log) {
  int raw = 0;
  ToolRun r;
  if (waitpid(pid, &raw, 0) != pid) return r;
  if (WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) r.signal = WTERMSIG(raw);
  r.err = test::read_all(log);
  return r;
}

ToolRun run(const std::vector<std::string>& args, const test::TempDir& dir) {
  const std::string log = dir.file("log.txt");
  return wait_for(spawn(args, log), log);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DataTool, OutputThatIsAnInputIsRefusedWithStatus2) {
  test::TempDir dir;
  const std::string text = ">a\nMKV\n>b\nWWW\n";
  const std::string in = dir.file("in.fa");
  test::write_text(in, text);
  std::filesystem::create_symlink("in.fa", dir.file("link.fa"));
  for (const std::string& out : {in, dir.path() + "/./in.fa", dir.file("link.fa")}) {
    SCOPED_TRACE(out);
    const ToolRun r = run({"prepare", "--output", out, in}, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("'" + out + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'" + in + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
    EXPECT_EQ(test::read_all(in), text);
  }
  // The clash found from the directory the tool runs in: a relative spelling.
  const std::string cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(dir.path());
  const ToolRun r = run({"prepare", "--output", "./in.fa", "in.fa"}, dir);
  std::filesystem::current_path(cwd);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(test::read_all(in), text);
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "link.fa", "log.txt"}));
}

// The output-path rule (data/output_path.h) as a user meets it: an earlier
// prepared file is replaced, anything else is refused with status 2, named,
// and left as it was.
TEST(DataTool, OutputReplacesOnlyAnEarlierDataFile) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n>b\nWWW\n");
  const std::string out = dir.file("out.h5");
  ASSERT_EQ(run({"prepare", "--output", out, in}, dir).status, 0);
  const ToolRun again = run({"prepare", "--output", out, "--seed", "5", in}, dir);
  EXPECT_EQ(again.status, 0) << again.err;
  // Not a data file of prepare: the user's notes, a checkpoint-like HDF5 file,
  // a folder, a link to nothing.
  const std::string notes = dir.file("notes.txt");
  test::write_text(notes, "keep me\n");
  const std::string ckpt = dir.file("ckpt-10.h5");
  {
    H5Id f = h5_create_file(ckpt);
    h5_write_attr_int64(f, "step", 10);
  }
  const std::string ckpt_bytes = test::read_all(ckpt);
  std::filesystem::create_directories(dir.file("folder"));
  std::filesystem::create_symlink(dir.file("nowhere"), dir.file("dangling.h5"));
  for (const std::string& target : {notes, ckpt, dir.file("folder"), dir.file("dangling.h5")}) {
    SCOPED_TRACE(target);
    const ToolRun r = run({"prepare", "--output", target, in}, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--output '" + target + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("refusing to replace it"), std::string::npos) << r.err;
  }
  EXPECT_EQ(test::read_all(notes), "keep me\n");
  EXPECT_EQ(test::read_all(ckpt), ckpt_bytes);
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("dangling.h5")));
}

// More threads than any machine has cores (the process could not start them
// all): refused before anything is read or written.
TEST(DataTool, ThreadsBeyondTheLimitAreRefusedWithStatus2) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n");
  for (const std::string tool : {"prepare", "audit"}) {
    const ToolRun r = tool == std::string("prepare") ? run({"prepare", "--output", dir.file("out.h5"), "--threads",
                                                            "100000", in},
                                                           dir)
                                                     : run({"audit", "--threads", "100000", in}, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("100000"), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"})) << tool;
  }
}

// NaN, text and out-of-range numbers never switch a feature off: each is
// refused with status 2 naming the option and the value, before any work.
TEST(DataTool, NanAndOutOfRangeNumbersAreRefusedWithStatus2) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n");
  const std::string out = dir.file("out.h5");
  const std::vector<std::vector<std::string>> cases = {
      {"prepare", "--output", out, "--cluster-identity", "nan", in},
      {"prepare", "--output", out, "--cluster-identity", "1.5", in},
      {"prepare", "--output", out, "--val-fraction", "NaN", in},
      {"prepare", "--output", out, "--cluster-coverage", "0.8x", in},
      {"audit", "--identity", "nan", in},
      {"audit", "--identity", "0", in},
      {"audit", "--max-fraction", "-0.1", in},
  };
  for (const std::vector<std::string>& args : cases) {
    SCOPED_TRACE(args[args.size() - 3] + " " + args[args.size() - 2]);
    const ToolRun r = run(args, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(args[args.size() - 3]), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'" + args[args.size() - 2] + "'"), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"}));
  }
  // Sizes: NaN, and one past what int64 holds (it used to print as a negative number).
  for (const std::string size : {"nan", "1e19", "inf"}) {
    const ToolRun r = run({"prepare", "--output", out, "--memory-budget", size, in}, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--memory-budget: '" + size + "'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("-9223372036854775808"), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"}));
  }
}

// How a cluster split clusters means nothing to the hash split: with
// --cluster-identity 0 the coverage and the mode are refused, not ignored.
TEST(DataTool, ClusteringOptionsWithTheHashSplitAreRefused) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n");
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{"--cluster-coverage", "0.3"}, {"--cluster-mode", "cluster"}}) {
    SCOPED_TRACE(extra[0]);
    std::vector<std::string> args = {"prepare", "--output", dir.file("out.h5"), "--cluster-identity", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(in);
    const ToolRun r = run(args, dir);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--cluster-identity 0 is the split by sequence hash"), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"}));
  }
}

// Every input is checked before the first is read: a missing second file
// is named before the first is scanned (on a large first input, hours), and
// a pipe, which prepare could read only once of the 2-3 times it reads each
// input, is refused instead of waited on. Extensions are read in any case.
TEST(DataTool, InputsAreCheckedBeforeAnyIsRead) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n");
  const ToolRun missing = run({"prepare", "--output", dir.file("out.h5"), in, dir.file("missing.fa")}, dir);
  EXPECT_EQ(missing.status, 1) << missing.err;
  EXPECT_NE(missing.err.find("cannot open '" + dir.file("missing.fa") + "'"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.err.find("scanning"), std::string::npos) << missing.err;
  const std::string fifo = dir.file("pipe.fa");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const ToolRun pipe = run({"prepare", "--output", dir.file("out.h5"), fifo}, dir);  // no writer: would block
  EXPECT_EQ(pipe.status, 1) << pipe.err;
  EXPECT_NE(pipe.err.find("'" + fifo + "' is not a regular file (a pipe or a device)"), std::string::npos) << pipe.err;
  std::filesystem::remove(fifo);
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"}));
  const std::string upper = dir.file("IN.FASTA");
  test::write_text(upper, ">a\nMKV\n>b\nMKVL\n");
  const ToolRun ok =
      run({"prepare", "--output", dir.file("out.h5"), "--val-fraction", "0", "--test-fraction", "0", upper}, dir);
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// A duplicate-table budget beyond the machine's memory: refused naming the
// option and the machine's memory (it used to end in std::bad_alloc).
TEST(DataTool, AMemoryBudgetBeyondTheMachineIsRefused) {
  test::TempDir dir;
  const std::string in = dir.file("in.fa");
  test::write_text(in, ">a\nMKV\n");
  const ToolRun r = run({"prepare", "--output", dir.file("out.h5"), "--memory-budget", "4000TiB", in}, dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("memory budget (--memory-budget) of 4000.00 TiB is more than this machine's memory"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"in.fa", "log.txt"}));
}

// Waits (up to a minute) until `path` exists; false if `pid` ended first.
bool wait_for_file(const std::string& path, pid_t pid) {
  for (int i = 0; i < 60000; ++i) {
    if (std::filesystem::exists(path)) return true;
    int raw = 0;
    if (waitpid(pid, &raw, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A prepare of the 20,000 UniProt sequences into DIR/db.h5, running, with its
// temporary file on disk (created before the first record is read; the
// records that follow take far longer than a signal's delivery).
struct RunningPrepare {
  std::string out, log, tmp;
  pid_t pid = -1;
  bool ready = false;  // the temporary file appeared while the process ran
};

RunningPrepare start_prepare(const test::TempDir& dir) {
  RunningPrepare r;
  r.out = dir.file("db.h5");
  r.log = dir.file("log.txt");
  r.pid = spawn({"prepare", "--output", r.out, test::kDbFasta}, r.log);
  if (r.pid <= 0) return r;
  r.tmp = r.out + ".tmp-" + std::to_string(r.pid);
  r.ready = wait_for_file(r.tmp, r.pid);
  return r;
}

TEST(DataTool, SigintAndSigtermRemoveTheTemporaryFile) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    test::TempDir dir;
    const RunningPrepare started = start_prepare(dir);
    ASSERT_TRUE(started.ready) << test::read_all(started.log);
    const pid_t pid = started.pid;
    const std::string &tmp = started.tmp, &log = started.log;
    ASSERT_EQ(kill(pid, sig), 0);
    const ToolRun r = wait_for(pid, log);
    EXPECT_EQ(r.signal, 0) << "ended by the signal itself, without cleaning up";
    EXPECT_EQ(r.status, 128 + sig) << r.err;
    EXPECT_NE(r.err.find("signal " + std::to_string(sig)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(tmp), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"log.txt"}) << r.err;
  }
}

TEST(DataTool, NextPrepareRemovesTheTemporaryFileOfAKilledRun) {
  test::TempDir dir;
  const RunningPrepare started = start_prepare(dir);
  ASSERT_TRUE(started.ready) << test::read_all(started.log);
  const pid_t pid = started.pid;
  const std::string &out = started.out, &tmp = started.tmp, &log = started.log;
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_for(pid, log).signal, SIGKILL);
  ASSERT_TRUE(std::filesystem::exists(tmp)) << "SIGKILL cannot be caught: its temporary file stays";
  const ToolRun r = run({"prepare", "--output", out, test::kQueryFasta}, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("removed stale temporary file '" + tmp + "'"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"db.h5", "log.txt"}));
}

TEST(DataTool, EverySequenceInTheTestSplit) {
  test::TempDir dir;
  const std::string out = dir.file("all.h5");
  const ToolRun r =
      run({"prepare", "--output", out, "--val-fraction", "0", "--test-fraction", "1", test::kQueryFasta}, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const DatasetInfo info = read_dataset_info(out);
  EXPECT_EQ(info.splits[0].sequences, 0);
  EXPECT_EQ(info.splits[1].sequences, 0);
  EXPECT_EQ(info.splits[2].sequences, info.sequences_read - info.duplicates_dropped);
  EXPECT_EQ(info.splits[2].sequences, 498);  // 500 records, 2 exact repeats
}

// The command of the report: a family table with one family of nearly every
// protein and 10 of one each. Whole families go to one split, so /train would
// be empty: status 2 naming /train, the fractions, the table and the family,
// and no file (prepare_dataset's own test checks the message in full).
TEST(DataTool, AFamilyThatEmptiesTrainIsRefusedWithStatus2) {
  test::TempDir dir;
  const std::vector<test::RefRecord> records = test::reference_fasta(test::kQueryFasta);
  std::string table;
  for (size_t i = 0; i < records.size(); ++i)
    table += records[i].header.substr(0, records[i].header.find(' ')) + "\t" +
             (i + 10 < records.size() ? std::string("big") : "small_" + std::to_string(i)) + "\n";
  const std::string tsv = dir.file("big.tsv"), out = dir.file("out.h5");
  test::write_text(tsv, table);
  const ToolRun r = run({"prepare", "--output", out, "--cluster-identity", "0.3", "--families", tsv, "--val-fraction",
                         "0.05", "--test-fraction", "0.05", test::kQueryFasta},
                        dir);
  EXPECT_EQ(r.status, 2) << r.err;
  for (const std::string& part :
       {"--families '" + tsv + "'", std::string("/train would be empty"),
        std::string("--val-fraction 0.05 and --test-fraction 0.05"), std::string("family 'big' (representative '")})
    EXPECT_NE(r.err.find(part), std::string::npos) << "missing: " << part << "\nin: " << r.err;
  EXPECT_EQ(r.err.find("train: 0 sequences"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace pf
