// performer-eval end to end, as a user runs it (the executables in child
// processes): a tiny model trained with `mpiexec -n 2 performer-train` and
// parallel.sp = 2, then
//   --fasta FILE gives exactly the numbers of `performer-data prepare
//     --val-fraction 0 --test-fraction 1 FILE` followed by an evaluation of
//     split test, on one rank and (to float rounding) on two; it also reads
//     Swiss-Prot, and removes its temporary folder, also when it fails;
//   one rank with the checkpoint's sp = 2 fails with a hint to pass
//     --set parallel.sp=1;
//   --batches -3, --fasta with --split, and --fasta of a missing file or of
//     an unknown format, are refused with status 2;
//   in packed and single mode, a length bucket that holds proteins longer
//     than a sample is marked "(crops)" and a footnote names
//     data.sample_length; a bucket whose proteins all fit is not marked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/data/data_test_util.h"
#include "tests/support/tool_run.h"

namespace pf {
namespace {

const char* kQuery = "/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz";
const char* kSwiss = "/usr/share/EMBOSS/test/swiss/seq.dat";

using test::quoted;
using test::ToolRun;
ToolRun run(const std::string& cmd, const std::string& log) { return test::run_tool(cmd, log); }

// The trained checkpoint, shared by the tests of this process.
struct Fixture {
  std::string dir, checkpoint;
  bool ok = false;
  ~Fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const Fixture& trained() {
  static Fixture f = [] {
    Fixture x;
    x.dir = (std::filesystem::temp_directory_path() / ("pf-eval-tool-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(x.dir);
    std::filesystem::create_directories(x.dir + "/tmp");
    const std::string data = x.dir + "/train.h5";
    ToolRun r = run(std::string(PF_DATA_TOOL) + " prepare --output " + quoted(data) +
                        " --val-fraction 0.1 --test-fraction 0.05 " + kQuery,
                    x.dir + "/prepare.log");
    EXPECT_EQ(r.status, 0) << r.out;
    const std::string sets =
        " --set model.layers=2 --set model.width=32 --set model.heads=2 --set model.ffn=64 --set model.features=16"
        " --set model.chunk=16 --set 'data.files=[\"" +
        data +
        "\"]' --set data.sample_length=48"
        " --set data.batch_size=4 --set optimizer.lr=3e-3 --set optimizer.warmup_steps=2 --set train.steps=6"
        " --set train.log_interval=100 --set train.eval_interval=0 --set train.eval_batches=2"
        " --set 'checkpoint.dir=\"" +
        x.dir +
        "/ckpt\"' --set checkpoint.interval=0 --set 'train.metrics=\"\"'"
        " --set parallel.sp=2";
    r = run(std::string(PF_MPIEXEC) + " -n 2 -x OMP_NUM_THREADS=1 " + PF_TRAIN_TOOL + sets, x.dir + "/train.log");
    EXPECT_EQ(r.status, 0) << r.out;
    x.checkpoint = x.dir + "/ckpt/ckpt-000000006.h5";
    x.ok = r.status == 0 && std::filesystem::exists(x.checkpoint);
    return x;
  }();
  return f;
}

// "loss L | ppl P | accuracy A | N tokens" of an evaluation's output line.
struct Numbers {
  std::string text;
  double loss = 0, ppl = 0;
};
Numbers numbers(const std::string& out) {
  static const std::regex re(R"(loss ([0-9.]+) \| ppl ([0-9.]+) \| accuracy [0-9.]+ \| [0-9]+ tokens)");
  std::smatch m;
  Numbers n;
  if (std::regex_search(out, m, re)) {
    n.text = m[0];
    n.loss = std::stod(m[1]);
    n.ppl = std::stod(m[2]);
  }
  return n;
}

class EvalTool : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(trained().ok) << "training the fixture failed";
    dir_ = trained().dir;
    // Each evaluation's temporary folder must go under here and be gone after.
    tmp_ = dir_ + "/tmp";
  }
  ToolRun eval(const std::string& args, int ranks = 1) const {
    const std::string launcher =
        ranks == 1 ? std::string() : std::string(PF_MPIEXEC) + " -n " + std::to_string(ranks) + " -x TMPDIR ";
    // Open MPI keeps its session folder out of TMPDIR (orte_tmpdir_base).
    return run("TMPDIR=" + quoted(tmp_) + " OMPI_MCA_orte_tmpdir_base=/tmp OMP_NUM_THREADS=1 " + launcher +
                   PF_EVAL_TOOL + " --checkpoint " + quoted(trained().checkpoint) + " " + args,
               dir_ + "/eval.log");
  }
  // No temporary data folder (pf-dataset-*) left in TMPDIR.
  bool tmp_empty() const {
    for (const auto& e : std::filesystem::directory_iterator(tmp_))
      if (e.path().filename().string().rfind("pf-dataset-", 0) == 0) return false;
    return true;
  }
  std::string dir_, tmp_;
};

TEST_F(EvalTool, FastaGivesTheNumbersOfPrepareThenEval) {
  const std::string all = dir_ + "/all.h5";
  const ToolRun p = run(
      std::string(PF_DATA_TOOL) + " prepare --output " + quoted(all) + " --val-fraction 0 --test-fraction 1 " + kQuery,
      dir_ + "/prepare-all.log");
  ASSERT_EQ(p.status, 0) << p.out;
  const ToolRun a = eval("--set parallel.sp=1 --set 'data.files=[\"" + all + "\"]' --split test");
  ASSERT_EQ(a.status, 0) << a.out;
  const ToolRun b = eval("--set parallel.sp=1 --fasta " + std::string(kQuery));
  ASSERT_EQ(b.status, 0) << b.out;
  const Numbers na = numbers(a.out), nb = numbers(b.out);
  ASSERT_FALSE(na.text.empty()) << a.out;
  ASSERT_FALSE(nb.text.empty()) << b.out;
  EXPECT_EQ(nb.text, na.text) << "prepare + eval:\n" << a.out << "--fasta:\n" << b.out;
  EXPECT_GT(na.ppl, 1.0);
  EXPECT_LT(na.ppl, 29.0);
  EXPECT_NE(b.out.find("QUERY.fasta.gz"), std::string::npos) << b.out;
  EXPECT_TRUE(tmp_empty()) << "temporary folder left in " << tmp_;

  // Two ranks with the checkpoint's sp = 2: the same numbers to float rounding.
  const ToolRun c = eval("--fasta " + std::string(kQuery), 2);
  ASSERT_EQ(c.status, 0) << c.out;
  const Numbers nc = numbers(c.out);
  EXPECT_NEAR(nc.loss, na.loss, 2e-4 * na.loss) << c.out;
  EXPECT_TRUE(tmp_empty()) << "temporary folder left in " << tmp_;
}

TEST_F(EvalTool, FastaReadsSwissProtAndCleansUpAfterAnError) {
  const ToolRun s = eval("--set parallel.sp=1 --fasta " + std::string(kSwiss));
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_FALSE(numbers(s.out).text.empty()) << s.out;
  EXPECT_TRUE(tmp_empty());
  const std::string bad = dir_ + "/bad.fa";
  std::ofstream(bad) << ">x\nMK1V\n";
  const ToolRun e = eval("--set parallel.sp=1 --fasta " + quoted(bad));
  EXPECT_NE(e.status, 0) << e.out;
  EXPECT_NE(e.out.find("bad.fa"), std::string::npos) << e.out;
  EXPECT_TRUE(tmp_empty()) << "temporary folder left after a failed preparation";
  // An unknown letter: the error's advice is an option this tool has.
  const std::string odd = dir_ + "/odd.fa";
  {
    std::ofstream out(odd);  // 8 proteins of 66 residues: a batch of the checkpoint's samples at least
    for (int i = 0; i < 8; ++i)
      out << ">j" << i << "\nMKJVLAAGWWKEQRST" << std::string(50, "ACDEFGHIKLMNPQ"[i]) << "\n";
  }
  const ToolRun j = eval("--set parallel.sp=1 --fasta " + quoted(odd));
  EXPECT_NE(j.status, 0) << j.out;
  EXPECT_NE(j.out.find("(use --map-unknown-to-x to read it as X)"), std::string::npos) << j.out;
  const ToolRun x = eval("--set parallel.sp=1 --map-unknown-to-x --fasta " + quoted(odd));
  ASSERT_EQ(x.status, 0) << x.out;
  EXPECT_FALSE(numbers(x.out).text.empty()) << x.out;
  EXPECT_TRUE(tmp_empty());
}

// SIGINT or SIGTERM a second into --fasta (preparing or evaluating the
// 20,000 proteins of DB.fasta.gz) ends the run with 128 + the signal and its
// temporary folder removed; a run killed outright (SIGKILL) leaves its
// folder, which the next --fasta run removes.
TEST_F(EvalTool, FastaFolderIsRemovedAfterASignalOrByTheNextRun) {
  const std::string db = "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz";
  const std::string common = "TMPDIR=" + test::quoted(tmp_) + " OMPI_MCA_orte_tmpdir_base=/tmp OMP_NUM_THREADS=1 ";
  const std::string args =
      std::string(PF_EVAL_TOOL) + " --checkpoint " + quoted(trained().checkpoint) + " --set parallel.sp=1 --fasta ";
  for (const char* sig : {"INT", "TERM"}) {
    SCOPED_TRACE(sig);
    // (timeout runs the tool in the foreground: a background job of a shell
    // without job control would ignore SIGINT)
    const std::string timed = "timeout --preserve-status -s " + std::string(sig) + " 1 ";
    const ToolRun r = run("(" + common + timed + args + db + "; echo \"exit $?\")", dir_ + "/signal.log");
    const int expected = 128 + (std::string(sig) == "INT" ? SIGINT : SIGTERM);
    EXPECT_NE(r.out.find("exit " + std::to_string(expected)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("the prepared copy of --fasta removed"), std::string::npos) << r.out;
    EXPECT_TRUE(tmp_empty()) << "temporary folder left after SIG" << sig;
  }
  const ToolRun k = run("(" + common + "timeout -s KILL 1 " + args + db + "; echo \"exit $?\")", dir_ + "/kill.log");
  EXPECT_NE(k.out.find("exit 137"), std::string::npos) << k.out;
  EXPECT_FALSE(tmp_empty()) << "SIGKILL left no folder: the next run's sweep is not tested";
  const ToolRun next = eval("--set parallel.sp=1 --fasta " + std::string(kSwiss));
  ASSERT_EQ(next.status, 0) << next.out;
  EXPECT_TRUE(tmp_empty()) << "the killed run's folder is still there";
}

TEST_F(EvalTool, FewerRanksThanTheCheckpointsSpHintAtParallelSp) {
  const ToolRun r = eval("--split test");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("parallel.sp = 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--set parallel.sp=1"), std::string::npos) << r.out;
}

// The line of a length bucket in the output ("" if absent).
std::string bucket_line(const std::string& out, const std::string& bucket) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find("proteins of " + bucket) != std::string::npos) return line;
  return "";
}

TEST_F(EvalTool, LengthBucketsSayWhenTheyScoreCrops) {
  const std::string query = " --fasta " + std::string(kQuery) + " --set 'data.mode=\"packed\"'";
  // 48-token samples: every protein of QUERY.fasta.gz (at least 50 residues) is cropped.
  ToolRun r = eval("--set parallel.sp=1 --set data.sample_length=48" + query);
  ASSERT_EQ(r.status, 0) << r.out;
  std::string small = bucket_line(r.out, "<= 1024 residues");
  ASSERT_FALSE(small.empty()) << r.out;
  EXPECT_NE(small.find("(crops)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data.sample_length = 48 tokens counts one crop"), std::string::npos) << r.out;
  // 1,040-token samples hold every protein of at most 1,024 residues whole.
  r = eval("--set parallel.sp=1 --set data.sample_length=1040 --set data.batch_size=1" + query);
  ASSERT_EQ(r.status, 0) << r.out;
  small = bucket_line(r.out, "<= 1024 residues");
  ASSERT_FALSE(small.empty()) << r.out;
  EXPECT_EQ(small.find("(crops)"), std::string::npos) << r.out;
  // QUERY's proteins longer than 1,039 residues are cropped at 1,040 tokens.
  std::vector<int64_t> lengths;
  for (const auto& rec : test::reference_fasta(kQuery)) lengths.push_back(static_cast<int64_t>(rec.residues.size()));
  const bool has_crops = std::any_of(lengths.begin(), lengths.end(), [](int64_t n) { return n + 1 > 1040; });
  const std::string longer = bucket_line(r.out, "1025-8192 residues");
  EXPECT_EQ(longer.find("(crops)") != std::string::npos, has_crops) << r.out;
  EXPECT_EQ(r.out.find("counts one crop") != std::string::npos, has_crops) << r.out;
  // Samples longer than every protein: no bucket is marked, whatever its
  // edges (the 1025-8192 bucket was marked for its edge, 8,192 + 1 > 8,192).
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  ASSERT_LT(longest + 1, 8192);
  r = eval("--set parallel.sp=1 --set data.sample_length=8192 --set data.batch_size=1 --set 'data.mode=\"single\"'" +
           std::string(" --fasta ") + kQuery);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("(crops)"), std::string::npos) << r.out;
}

TEST_F(EvalTool, UsageErrorsExitWithStatus2) {
  ToolRun r = eval("--set parallel.sp=1 --batches -3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--batches"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-3"), std::string::npos) << r.out;
  EXPECT_EQ(numbers(r.out).text, "") << "evaluated anyway: " << r.out;
  r = eval("--set parallel.sp=1 --fasta " + std::string(kQuery) + " --split valid");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--fasta"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--split"), std::string::npos) << r.out;
  r = eval("--set parallel.sp=1 --fasta " + dir_ + "/absent.fa");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--fasta: no such file '" + dir_ + "/absent.fa'"), std::string::npos) << r.out;
  r = eval("--set parallel.sp=1 --fasta " + dir_ + "/train.h5");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("train.h5"), std::string::npos) << r.out;
  EXPECT_TRUE(tmp_empty());
  r = eval("--set parallel.sp=1 --set 'data.mode=\"family\"' --fasta " + std::string(kQuery));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("proteins read from --fasta have no families"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--set data.mode=\"packed\""), std::string::npos) << r.out;
  {  // a data file given as the checkpoint
    const std::string cmd = std::string(PF_EVAL_TOOL) + " --checkpoint " + quoted(dir_ + "/train.h5");
    r = run("OMP_NUM_THREADS=1 " + cmd, dir_ + "/eval.log");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("--checkpoint: not a usable checkpoint"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("train.h5: not a performer checkpoint"), std::string::npos) << r.out;
  }
  r = eval("--set parallel.sp=1 --map-unknown-to-x --split test");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--map-unknown-to-x applies to the letters of --fasta files"), std::string::npos) << r.out;
  r = eval("--set parallel.sp=1 --split nope");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--split must be train, valid, test or ood, got 'nope'"), std::string::npos) << r.out;
  // Sizes no machine holds (from --set here, from a crafted checkpoint's
  // configuration alike): the plan, refused before anything is allocated.
  r = eval("--set parallel.sp=1 --set data.batch_size=1073741824 --split test");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("the memory plan of one rank (1073741824 x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("more than this machine's memory"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pf
