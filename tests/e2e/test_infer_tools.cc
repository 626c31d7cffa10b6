// performer-score, performer-embed and performer-generate as a user runs them
// (the executables in child processes, under mpiexec for several ranks), on
// checkpoints written here from randomly initialised tiny models:
//   score (causal, --first-residue context) gives performer-eval's loss on
//     the same proteins (eval --fasta with data.mode = "single"); one and two
//     ranks agree, TSV and JSONL agree, the per-residue HDF5 sums to the totals;
//   score (masked) is the pseudo-log-likelihood: one forward per masked
//     residue, computed here with the model, agrees with the tool's, on one
//     and on two ranks;
//   a synthetic titin-length protein (35,213 residues) scores the same on
//     four ranks and on one;
//   embed writes ids, lengths, means [N, C] and per-residue rows whose mean is
//     the mean, the same on one and two ranks;
//   generate gives the same proteins for the same seed on one and two ranks,
//     other proteins for another seed, continues prompts, stops at
//     --max-length;
//   bad input: a masked checkpoint given to generate, an unknown letter, an
//     empty FASTA, a checkpoint of another vocabulary or of another model
//     layout, an unknown extension and bad options: each refused with a
//     message naming the file (or option) and the reason, status 2 for usage
//     errors and 1 for malformed sequence files (as performer-data).
// The .async entry runs the multi-rank cases with PF_CPU_STREAMS passed to
// every rank (asynchronous jittered CPU streams): the same checks hold.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "data/h5.h"
#include "data/sequence_reader.h"
#include "data/vocab.h"
#include "launch/core/checkpoint.h"
#include "launch/core/train_config.h"
#include "model/model.h"
#include "runtime/exec.h"
#include "runtime/random.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/support/numerics.h"
#include "tests/support/tool_run.h"

namespace pf {
namespace {

using test::set_override;
using test::set_overrides;

const char* kQuery = "/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz";

using test::quoted;
using test::ToolRun;
ToolRun run(const std::string& cmd, const std::string& log) { return test::run_tool(cmd, log); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> tiny_model(const std::string& objective) {
  return {"model.layers=2",    "model.width=32",        "model.heads=2",      "model.ffn=64",
          "model.features=16", "model.chunk=16",        "model.init_std=0.1", "model.objective=\"" + objective + "\"",
          "data.batch_size=4", "data.sample_length=256"};
}

// A checkpoint of a randomly initialised model: configuration `sets`, whose
// stored text it carries, and tensors of `shape` (the model of `sets` unless
// a test wants tensors that do not fit it).
void write_random_checkpoint(const std::string& path, const std::vector<std::string>& sets, const ModelConfig& shape) {
  const TrainConfig cfg = load_train_config("", sets);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(shape, res.ctx(), nullptr);
  CheckpointState st;
  st.config_text = cfg.source_text;
  const Tensor& p = model.params();
  st.params.assign(p.data<float>(), p.data<float>() + p.numel());
  st.m.assign(st.params.size(), 0.0f);
  st.v.assign(st.params.size(), 0.0f);
  st.loss_scale = 1;
  write_checkpoint(path, st, model.layout(), shape);
}

ModelConfig model_of(const std::vector<std::string>& sets) { return load_train_config("", sets).model; }

// Proteins of QUERY.fasta.gz between 30 and 200 residues (distinct), as FASTA.
std::vector<SequenceRecord> short_proteins(int64_t count) {
  SequenceReader reader(kQuery);
  std::vector<SequenceRecord> out;
  SequenceRecord rec;
  while (static_cast<int64_t>(out.size()) < count && reader.next(rec))
    if (rec.tokens.size() >= 30 && rec.tokens.size() <= 200) out.push_back(rec);
  return out;
}

std::string letters(const std::vector<uint8_t>& tokens) {
  std::string s;
  for (uint8_t t : tokens) s += Vocab::residue_letter(t);
  return s;
}

void write_fasta(const std::string& path, const std::vector<SequenceRecord>& recs) {
  std::ofstream out(path);
  for (const SequenceRecord& r : recs) out << ">" << r.id << "\n" << letters(r.tokens) << "\n";
}

struct Fixture {
  std::string dir, causal, masked, vocab33, layout, proteins, titin;
  std::vector<SequenceRecord> records;
  ~Fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = (std::filesystem::temp_directory_path() / ("pf-infer-tools-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(x.dir);
    std::filesystem::create_directories(x.dir + "/tmp");
    x.causal = x.dir + "/causal.h5";
    x.masked = x.dir + "/masked.h5";
    x.vocab33 = x.dir + "/vocab33.h5";
    x.layout = x.dir + "/layout.h5";
    const std::vector<std::string> clm = tiny_model("clm"), mlm = tiny_model("mlm");
    write_random_checkpoint(x.causal, clm, model_of(clm));
    write_random_checkpoint(x.masked, mlm, model_of(mlm));
    // Another vocabulary: 33 tokens (the embedding and tied head have 33 rows).
    ModelConfig v33 = model_of(clm);
    v33.vocab = 33;
    write_random_checkpoint(x.vocab33, clm, v33);
    // Another layout: the configuration says width 48, the tensors are width 32.
    std::vector<std::string> wide = clm;
    set_override(wide, "model.width=48");
    set_override(wide, "model.heads=3");
    write_random_checkpoint(x.layout, wide, model_of(clm));
    x.records = short_proteins(6);
    x.proteins = x.dir + "/proteins.fasta";
    write_fasta(x.proteins, x.records);
    // A titin-length protein of real amino-acid letters.
    SequenceRecord titin;
    titin.id = "synthetic_titin";
    const KeyedRandom r(35213, 1, 2);
    for (int64_t i = 0; i < 35213; ++i)
      titin.tokens.push_back(static_cast<uint8_t>(Vocab::kFirstResidue + r.draw(static_cast<uint64_t>(i)).v[0] % 20));
    x.titin = x.dir + "/titin.fasta";
    write_fasta(x.titin, {titin});
    return x;
  }();
  return f;
}

// One TSV row of performer-score.
struct Row {
  std::string id, measure;
  int64_t length = 0, scored = 0;
  double ll = 0, ppl = 0;
};

std::vector<Row> parse_tsv(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "id\tlength\tmeasure\tscored\tlog_likelihood\tperplexity");
  while (std::getline(in, line)) {
    std::istringstream f(line);
    Row r;
    f >> r.id >> r.length >> r.measure >> r.scored >> r.ll >> r.ppl;
    rows.push_back(r);
  }
  return rows;
}

class InferTools : public testing::Test {
 protected:
  const Fixture& fx() const { return fixture(); }
  // Runs a tool on `ranks` ranks (one without mpiexec); output in log files.
  // PF_CPU_STREAMS, when set (the .async entry), reaches every rank.
  ToolRun tool(const std::string& exe, const std::string& args, int ranks = 1) const {
    const std::string launcher = ranks == 1 ? std::string()
                                            : std::string(PF_MPIEXEC) + " -n " + std::to_string(ranks) + " -x TMPDIR " +
                                                  (std::getenv("PF_CPU_STREAMS") ? "-x PF_CPU_STREAMS " : "");
    const std::string log = fx().dir + "/run-" + std::to_string(counter_++) + ".log";
    return run("TMPDIR=" + quoted(fx().dir + "/tmp") + " OMPI_MCA_orte_tmpdir_base=/tmp OMP_NUM_THREADS=1 " + launcher +
                   exe + " " + args,
               log);
  }
  std::string out(const std::string& name) const { return fx().dir + "/" + name; }
  mutable int counter_ = 0;
};

TEST_F(InferTools, CausalScoreEqualsEvalLoss) {
  const std::string tsv = out("causal.tsv");
  ToolRun r =
      tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --first-residue context --output " + quoted(tsv) +
                              " --per-residue " + quoted(out("causal_residues.h5")) + " " + quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<Row> rows = parse_tsv(read_text(tsv));
  ASSERT_EQ(rows.size(), fx().records.size());
  double ll = 0;
  int64_t scored = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].id, fx().records[i].id);
    EXPECT_EQ(rows[i].measure, "log_likelihood");
    EXPECT_EQ(rows[i].length, static_cast<int64_t>(fx().records[i].tokens.size()));
    EXPECT_EQ(rows[i].scored, rows[i].length);  // residues 2..n and <end>
    EXPECT_NEAR(rows[i].ppl, std::exp(-rows[i].ll / rows[i].scored), 1e-4 * rows[i].ppl);
    ll += rows[i].ll;
    scored += rows[i].scored;
  }
  // performer-eval on the same proteins, each a data.mode = "single" sample.
  r = tool(PF_EVAL_TOOL, "--checkpoint " + quoted(fx().causal) + " --fasta " + quoted(fx().proteins) +
                             " --set 'data.mode=\"single\"' --set data.sample_length=256");
  ASSERT_EQ(r.status, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(loss ([0-9.]+) \| ppl [0-9.]+ \| accuracy ([0-9.]+) \| ([0-9]+) tokens)")))
      << r.out;
  EXPECT_EQ(std::stoll(m[3]), scored);
  // eval prints the loss with 4 decimals.
  EXPECT_NEAR(-ll / static_cast<double>(scored), std::stod(m[1]), 6e-5) << r.out;

  // Per-residue values: the first residue is context only (NaN), the rest sum
  // to the totals; `top` is NaN where logprob is, 0 or 1 elsewhere, and its
  // mean is eval's accuracy on the same tokens (printed with 4 decimals).
  H5Id f = h5_open_file(out("causal_residues.h5"));
  const std::vector<double> lp = h5_read_array<double>(f, "logprob");
  const std::vector<double> top = h5_read_array<double>(f, "top");
  ASSERT_EQ(top.size(), lp.size());
  double tops = 0;
  for (size_t k = 0; k < lp.size(); ++k) {
    ASSERT_EQ(std::isnan(top[k]), std::isnan(lp[k])) << "slot " << k;
    if (std::isnan(top[k])) continue;
    ASSERT_TRUE(top[k] == 0.0 || top[k] == 1.0) << "slot " << k << ": " << top[k];
    tops += top[k];
  }
  EXPECT_NEAR(tops / static_cast<double>(scored), std::stod(m[2]), 6e-5) << r.out;
  const std::vector<int64_t> offsets = h5_read_array<int64_t>(f, "offsets");
  const std::vector<std::string> ids = h5_read_strings(f, "ids");
  EXPECT_EQ(h5_read_attr_string(f, "measure"), "log_likelihood");
  ASSERT_EQ(offsets.size(), rows.size() + 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(ids[i], rows[i].id);
    EXPECT_EQ(offsets[i + 1] - offsets[i], rows[i].length + 1);
    EXPECT_TRUE(std::isnan(lp[offsets[i]]));
    double sum = 0;
    for (int64_t k = offsets[i] + 1; k < offsets[i + 1]; ++k) sum += lp[k];
    EXPECT_NEAR(sum, rows[i].ll, 1e-5 * std::abs(rows[i].ll) + 1e-6);
  }

  // Two ranks, JSONL, the default layout with a leading <end>: every residue scored.
  const std::string jsonl = out("causal.jsonl");
  r = tool(PF_SCORE_TOOL,
           "--checkpoint " + quoted(fx().causal) + " --first-residue context --format jsonl --output " + quoted(jsonl) +
               " " + quoted(fx().proteins),
           2);
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(read_text(jsonl));
  std::string line;
  for (const Row& row : rows) {
    ASSERT_TRUE(static_cast<bool>(std::getline(lines, line)));
    EXPECT_NE(line.find("\"id\":\"" + row.id + "\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"measure\":\"log_likelihood\""), std::string::npos) << line;
    const size_t k = line.find("\"log_likelihood\":");
    ASSERT_NE(k, std::string::npos);
    EXPECT_NEAR(std::stod(line.substr(k + 17)), row.ll, 1e-5 * std::abs(row.ll)) << row.id;
  }
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --output " + quoted(out("full.tsv")) + " " +
                              quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<Row> full = parse_tsv(read_text(out("full.tsv")));
  ASSERT_EQ(full.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(full[i].scored, rows[i].length + 1);
}

// --set model.attention=exp on a FAVOR+ checkpoint: exp's projections, which
// the file lacks, start as FAVOR+'s draw (said on stderr), so with the key
// norm the scores are FAVOR+'s; every other tensor is the checkpoint's.
TEST_F(InferTools, ExpThroughSetStartsAsTheFavorCheckpoint) {
  const std::string args = "--checkpoint " + quoted(fx().causal) + " --first-residue context ";
  ToolRun favor = tool(PF_SCORE_TOOL, args + "--output " + quoted(out("as_favor.tsv")) + " " + quoted(fx().proteins));
  ASSERT_EQ(favor.status, 0) << favor.out;
  ToolRun exp = tool(PF_SCORE_TOOL, args + "--set 'model.attention=\"exp\"' --set model.exp_key_norm=true --output " +
                                        quoted(out("as_exp.tsv")) + " " + quoted(fx().proteins));
  ASSERT_EQ(exp.status, 0) << exp.out;
  EXPECT_NE(exp.out.find("not in the checkpoint, initialised: attn.features of layer(s) 0, 1"), std::string::npos)
      << exp.out;
  EXPECT_EQ(favor.out.find("initialised"), std::string::npos) << favor.out;
  const std::vector<Row> a = parse_tsv(read_text(out("as_favor.tsv"))), b = parse_tsv(read_text(out("as_exp.tsv")));
  ASSERT_EQ(a.size(), fx().records.size());
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i].ll, a[i].ll, 1e-5 * std::abs(a[i].ll)) << a[i].id;
  // Without the key norm exp is another function of the same weights.
  ToolRun moved = tool(PF_SCORE_TOOL, args + "--set 'model.attention=\"exp\"' --output " +
                                          quoted(out("as_exp_moved.tsv")) + " " + quoted(fx().proteins));
  ASSERT_EQ(moved.status, 0) << moved.out;
  const std::vector<Row> c = parse_tsv(read_text(out("as_exp_moved.tsv")));
  ASSERT_EQ(c.size(), a.size());
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(c[i].ll - a[i].ll));
  EXPECT_GT(diff, 1e-3);
}

TEST_F(InferTools, MaskedScoreIsThePseudoLogLikelihood) {
  const std::string one = out("masked1.tsv"), two = out("masked2.tsv");
  ToolRun r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().masked) + " --pll-batch-tokens 512 --output " +
                                      quoted(one) + " " + quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  r = tool(PF_SCORE_TOOL,
           "--checkpoint " + quoted(fx().masked) + " --pll-batch-tokens 100 --output " + quoted(two) + " " +
               quoted(fx().proteins),
           2);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<Row> a = parse_tsv(read_text(one)), b = parse_tsv(read_text(two));
  ASSERT_EQ(a.size(), fx().records.size());
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].measure, "pseudo_log_likelihood");
    EXPECT_EQ(a[i].scored, a[i].length);
    EXPECT_NEAR(b[i].ll, a[i].ll, 1e-5 * std::abs(a[i].ll)) << a[i].id;
  }
  // The definition, with the model: residue i masked in r_1..r_n <end>.
  const TrainConfig cfg = load_train_config("", tiny_model("mlm"));
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg.model, res.ctx(), nullptr);  // the checkpoint's parameters (same seed)
  const std::vector<uint8_t>& t = fx().records[0].tokens;
  const int64_t n = static_cast<int64_t>(t.size());
  double pll = 0;
  for (int64_t i = 0; i < n; ++i) {
    ModelInput in;
    in.batch = 1;
    in.n = n + 1;
    for (int64_t p = 0; p <= n; ++p) {
      const int32_t tok = p < n ? t[p] : Vocab::kEnd;
      in.inputs.push_back(p == i ? cfg.model.tokens.mask : tok);
      in.targets.push_back(p == i ? tok : -1);
    }
    pll -= model.forward(in, 0).loss_sum;
  }
  EXPECT_NEAR(a[0].ll, pll, 1e-5 * std::abs(pll));
}

// --pack: proteins scored together as packed samples give the scores of one
// protein at a time, causal and masked, on 1 and 2 ranks (the packs are cut
// so that several hold more than one protein and proteins span the ranks).
TEST_F(InferTools, PackedScoresEqualOneProteinAtATime) {
  for (const std::string& ckpt : {fx().causal, fx().masked}) {
    const std::string one = out("pack_ref.tsv");
    ToolRun r =
        tool(PF_SCORE_TOOL, "--checkpoint " + quoted(ckpt) + " --output " + quoted(one) + " " + quoted(fx().proteins));
    ASSERT_EQ(r.status, 0) << r.out;
    const std::vector<Row> a = parse_tsv(read_text(one));
    for (int ranks : {1, 2}) {
      const std::string packed = out("pack_" + std::to_string(ranks) + ".tsv");
      r = tool(PF_SCORE_TOOL,
               "--checkpoint " + quoted(ckpt) + " --pack 700 --pll-batch-tokens 300 --output " + quoted(packed) + " " +
                   quoted(fx().proteins),
               ranks);
      ASSERT_EQ(r.status, 0) << r.out;
      const std::vector<Row> b = parse_tsv(read_text(packed));
      ASSERT_EQ(b.size(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i].id, a[i].id);
        EXPECT_EQ(b[i].scored, a[i].scored);
        EXPECT_NEAR(b[i].ll, a[i].ll, 1e-5 * std::abs(a[i].ll)) << a[i].id << " on " << ranks << " rank(s)";
      }
    }
  }
  EXPECT_EQ(tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --pack -1 " + quoted(fx().proteins)).status,
            2);
}

TEST_F(InferTools, TitinLengthScoresOnFourRanksAsOnOne) {
  ToolRun one = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --output " + quoted(out("titin1.tsv")) +
                                        " " + quoted(fx().titin));
  ASSERT_EQ(one.status, 0) << one.out;
  ToolRun four = tool(
      PF_SCORE_TOOL,
      "--checkpoint " + quoted(fx().causal) + " --output " + quoted(out("titin4.tsv")) + " " + quoted(fx().titin), 4);
  ASSERT_EQ(four.status, 0) << four.out;
  const std::vector<Row> a = parse_tsv(read_text(out("titin1.tsv")));
  const std::vector<Row> b = parse_tsv(read_text(out("titin4.tsv")));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].length, 35213);
  EXPECT_EQ(b[0].scored, 35214);
  EXPECT_NEAR(b[0].ll, a[0].ll, 1e-6 * std::abs(a[0].ll));
  EXPECT_NE(four.out.find("4 rank(s)"), std::string::npos) << four.out;
}

// Two tables of performer-score (any columns) that agree: the same text
// field by field, numbers to `tol` of their size.
void expect_same_table(const std::string& a, const std::string& b, double tol, const std::string& what) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  int line = 0;
  while (std::getline(ia, la)) {
    ++line;
    ASSERT_TRUE(std::getline(ib, lb)) << what << ": line " << line << " missing";
    std::istringstream fa(la), fb(lb);
    std::string x, y;
    while (std::getline(fa, x, '\t')) {
      ASSERT_TRUE(std::getline(fb, y, '\t')) << what << ": line " << line << " has fewer fields";
      char* end = nullptr;
      const double vx = std::strtod(x.c_str(), &end);
      if (end == x.c_str() || *end != '\0') {
        EXPECT_EQ(x, y) << what << ": line " << line;
        continue;
      }
      EXPECT_NEAR(std::strtod(y.c_str(), nullptr), vx, tol * std::max(1.0, std::abs(vx))) << what << ": line " << line;
    }
  }
  EXPECT_FALSE(std::getline(ib, lb)) << what << ": more lines than expected";
  EXPECT_GT(line, 1) << what << ": no rows";
}

// A windowed checkpoint (model.window = 64: each rank's window reaches 63
// rows into its neighbour's) on 2 ranks, with proteins shorter than
// 2 x 63 positions among them (5 residues the shortest): the same scores as
// on 1 rank (the row is padded with a filler of its own), causal and masked,
// one at a time and packed, and given a context (cached and one pass).
TEST_F(InferTools, AWindowedCheckpointScoresOnTwoRanksAsOnOne) {
  std::vector<SequenceRecord> proteins = fx().records;
  SequenceRecord tiny;
  tiny.id = "five_residues";
  tiny.tokens = {proteins[0].tokens.begin(), proteins[0].tokens.begin() + 5};
  proteins.insert(proteins.begin() + 1, tiny);
  const std::string fasta = out("windowed_proteins.fasta"), context = out("windowed_context.fasta");
  write_fasta(fasta, proteins);
  write_fasta(context, {proteins[2], proteins[3]});
  size_t shorter = 0;
  for (const SequenceRecord& r : proteins) shorter += r.tokens.size() + 1 < 2 * 63 ? 1 : 0;
  ASSERT_GE(shorter, 2u) << "the test needs proteins shorter than 2 (window - 1)";
  for (const std::string objective : {"clm", "mlm"}) {
    std::vector<std::string> sets = tiny_model(objective);
    sets.push_back("model.window=64");
    const std::string ckpt = out("windowed_" + objective + ".h5");
    write_random_checkpoint(ckpt, sets, model_of(sets));
    std::vector<std::string> modes = {"", " --pack 400"};
    if (objective == "clm")
      for (const char* m : {"cached", "one-pass"})
        modes.push_back(std::string(" --context ") + quoted(context) + " --context-mode " + m);
    for (const std::string& mode : modes) {
      std::string tables[2];
      for (int ranks : {1, 2}) {
        const std::string table = out("windowed_" + objective + "_" + std::to_string(ranks) + ".tsv");
        const ToolRun r =
            tool(PF_SCORE_TOOL,
                 "--checkpoint " + quoted(ckpt) + mode + " --output " + quoted(table) + " " + quoted(fasta), ranks);
        ASSERT_EQ(r.status, 0) << objective << mode << " on " << ranks << " rank(s)\n" << r.out;
        tables[ranks - 1] = read_text(table);
      }
      expect_same_table(tables[1], tables[0], 1e-5, objective + mode + ": 2 ranks against 1");
    }
  }
}

// A checkpoint's window far longer than any protein (2^40 - 1, the largest
// model.window, and 4,000,000): generation and scoring given a context,
// cached and in one pass, finish under a 2 GB address-space limit (the window
// rows follow the tokens run, model/recurrent.h), and cached equals one pass.
TEST_F(InferTools, AWindowLongerThanAnyProteinCostsOnlyItsTokens) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit under test";
#endif
  const std::string context = out("long_window_context.fasta"), fasta = out("long_window_queries.fasta");
  write_fasta(context, {fx().records[0], fx().records[1], fx().records[2]});
  write_fasta(fasta, {fx().records[3], fx().records[4]});
  for (const std::string window : {"1099511627775", "4000000"}) {
    std::vector<std::string> sets = tiny_model("clm");
    sets.push_back("model.window=" + window);
    const std::string ckpt = out("long_window_" + window + ".h5");
    write_random_checkpoint(ckpt, sets, model_of(sets));
    auto limited = [&](const std::string& exe, const std::string& args, const std::string& name) {
      return run("ulimit -v 2000000 && TMPDIR=" + quoted(fx().dir + "/tmp") + " OMP_NUM_THREADS=1 " + exe + " " + args,
                 out(name + ".log"));
    };
    const ToolRun gen = limited(PF_GENERATE_TOOL,
                                "--checkpoint " + quoted(ckpt) + " --num 2 --max-length 300 --seed 3 --output " +
                                    quoted(out("long_window_" + window + ".fasta")),
                                "long_window_generate_" + window);
    EXPECT_EQ(gen.status, 0) << "performer-generate, model.window = " << window << "\n" << gen.out;
    std::string tables[2];
    int i = 0;
    for (const char* mode : {"cached", "one-pass"}) {
      const std::string table = out("long_window_" + window + "_" + mode + ".tsv");
      const ToolRun r = limited(PF_SCORE_TOOL,
                                "--checkpoint " + quoted(ckpt) + " --context " + quoted(context) + " --context-mode " +
                                    mode + " --output " + quoted(table) + " " + quoted(fasta),
                                "long_window_score_" + window + "_" + mode);
      ASSERT_EQ(r.status, 0) << "performer-score --context-mode " << mode << ", model.window = " << window << "\n"
                             << r.out;
      tables[i++] = read_text(table);
    }
    expect_same_table(tables[0], tables[1], 1e-5, "model.window = " + window + ": cached against one pass");
    // On 2 ranks a short protein would be padded to 2 (window - 1)
    // positions: refused, naming the checkpoint, the key and the limit.
    const ToolRun two = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(ckpt) + " " + quoted(fasta), 2);
    EXPECT_EQ(two.status, 2) << two.out;
    EXPECT_NE(two.out.find(ckpt + ": model.window = " + window + " on 2 ranks"), std::string::npos) << two.out;
    EXPECT_NE(two.out.find("data.sample_length"), std::string::npos) << two.out;
  }
}

// Exact softmax generates with a window (its recurrent form keeps the window's
// rows) and is refused without one, the message naming the checkpoint and
// model.window.
TEST_F(InferTools, SoftmaxGeneratesWithAWindowOnly) {
  for (const std::string window : {"16", "0"}) {
    std::vector<std::string> sets = tiny_model("clm");
    sets.push_back("model.attention=\"softmax\"");
    sets.push_back("model.window=" + window);
    const std::string ckpt = out("softmax_window_" + window + ".h5"), fasta = out("softmax_" + window + ".fasta");
    write_random_checkpoint(ckpt, sets, model_of(sets));
    const ToolRun r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(ckpt) +
                                                 " --num 2 --max-length 40 --seed 1 --output " + quoted(fasta));
    if (window != "0") {
      EXPECT_EQ(r.status, 0) << r.out;
      SequenceReader reader(fasta);
      SequenceRecord rec;
      int records = 0;
      while (reader.next(rec)) ++records;
      EXPECT_EQ(records, 2);
    } else {
      EXPECT_EQ(r.status, 2) << r.out;
      EXPECT_NE(r.out.find(ckpt + ": model.attention = softmax without a window (model.window = 0)"), std::string::npos)
          << r.out;
    }
  }
}

// --pack: proteins embedded together as packed samples give the embeddings of
// one protein at a time (means and residue rows), on 1 and 2 ranks.
TEST_F(InferTools, PackedEmbeddingsEqualOneProteinAtATime) {
  const std::string one = out("embed_ref.h5");
  ToolRun r = tool(PF_EMBED_TOOL, "--checkpoint " + quoted(fx().masked) + " --per-residue --output " + quoted(one) +
                                      " " + quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  H5Id a = h5_open_file(one);
  const std::vector<float> mean = h5_read_array<float>(a, "mean");
  const std::vector<float> rows = h5_read_array<float>(h5_open_group(a, "residues"), "embeddings");
  for (int ranks : {1, 2}) {
    const std::string packed = out("embed_pack" + std::to_string(ranks) + ".h5");
    r = tool(PF_EMBED_TOOL,
             "--checkpoint " + quoted(fx().masked) + " --per-residue --pack 500 --output " + quoted(packed) + " " +
                 quoted(fx().proteins),
             ranks);
    ASSERT_EQ(r.status, 0) << r.out;
    H5Id b = h5_open_file(packed);
    EXPECT_EQ(h5_read_strings(b, "ids"), h5_read_strings(a, "ids"));
    EXPECT_LT(test::rel_l2(h5_read_array<float>(b, "mean"), mean), 1e-5) << ranks << " rank(s)";
    EXPECT_LT(test::rel_l2(h5_read_array<float>(h5_open_group(b, "residues"), "embeddings"), rows), 1e-5)
        << ranks << " rank(s)";
  }
}

TEST_F(InferTools, EmbedWritesMeansAndResidueRows) {
  const std::string one = out("embed1.h5"), two = out("embed2.h5");
  ToolRun r = tool(PF_EMBED_TOOL, "--checkpoint " + quoted(fx().causal) + " --per-residue --output " + quoted(one) +
                                      " " + quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  r = tool(
      PF_EMBED_TOOL,
      "--checkpoint " + quoted(fx().causal) + " --per-residue --output " + quoted(two) + " " + quoted(fx().proteins),
      2);
  ASSERT_EQ(r.status, 0) << r.out;
  const int64_t N = static_cast<int64_t>(fx().records.size()), C = 32;
  H5Id a = h5_open_file(one), b = h5_open_file(two);
  std::vector<int64_t> shape;
  const std::vector<float> mean = h5_read_array<float>(a, "mean", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{N, C}));
  EXPECT_EQ(h5_read_strings(a, "ids")[0], fx().records[0].id);
  EXPECT_EQ(h5_read_attr_string(a, "layer_name"), "final_layernorm");
  const std::vector<int64_t> lengths = h5_read_array<int64_t>(a, "lengths");
  H5Id g = h5_open_group(a, "residues");
  const std::vector<int64_t> offsets = h5_read_array<int64_t>(g, "offsets");
  const std::vector<float> rows = h5_read_array<float>(g, "embeddings", &shape);
  EXPECT_EQ(shape[0], offsets.back());
  const std::vector<float> mean2 = h5_read_array<float>(b, "mean");
  for (int64_t i = 0; i < N; ++i) {
    EXPECT_EQ(lengths[i], static_cast<int64_t>(fx().records[i].tokens.size()));
    EXPECT_EQ(offsets[i + 1] - offsets[i], lengths[i]);
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t k = offsets[i]; k < offsets[i + 1]; ++k) s += rows[k * C + c];
      EXPECT_NEAR(s / static_cast<double>(lengths[i]), mean[i * C + c], 1e-5);
      EXPECT_NEAR(mean2[i * C + c], mean[i * C + c], 1e-4);
    }
  }
  // Another layer.
  r = tool(PF_EMBED_TOOL, "--checkpoint " + quoted(fx().causal) + " --layer 1 --output " + quoted(out("embedl1.h5")) +
                              " " + quoted(fx().proteins));
  ASSERT_EQ(r.status, 0) << r.out;
  H5Id l1 = h5_open_file(out("embedl1.h5"));
  EXPECT_EQ(h5_read_attr_int64(l1, "layer"), 1);
  EXPECT_NE(h5_read_array<float>(l1, "mean"), mean);
}

// A model trained in packed (or single) mode never predicted a protein's first
// residue: its proteins start at position 0 with the prompt, M by default,
// and are the greedy continuation of the recurrent model fed from there.
TEST_F(InferTools, GenerationOfAPackedModelStartsAtItsPrompt) {
  const std::string args = "--checkpoint " + quoted(fx().causal) +
                           " --set 'data.mode=\"packed\"' --num 2 --max-length 12 --temperature 0 --output ";
  ToolRun r = tool(PF_GENERATE_TOOL, args + quoted(out("gen_packed.fasta")));
  ASSERT_EQ(r.status, 0) << r.out;
  SequenceReader reader(out("gen_packed.fasta"));
  SequenceRecord rec;
  std::vector<SequenceRecord> got;
  while (reader.next(rec)) got.push_back(rec);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(letters(got[0].tokens).substr(0, 1), "M");
  EXPECT_NE(got[0].header.find("prompt=M prompt_length=1"), std::string::npos) << got[0].header;
  // The greedy reference: M at position 0, then the arg max of each step.
  const TrainConfig cfg = load_train_config("", tiny_model("clm"));
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg.model, res.ctx(), nullptr);  // the checkpoint's parameters (same seed)
  std::vector<uint8_t> want = {Vocab::encode('M')};
  for (size_t len = 1; len < got[0].tokens.size() + 1 && want.size() < 13; ++len) {
    ModelInput in;
    in.batch = 1;
    in.n = static_cast<int64_t>(want.size());
    for (uint8_t t : want) {
      in.inputs.push_back(t);
      in.targets.push_back(-1);
    }
    std::vector<float> logits;
    model.forward(in, 0, &logits);
    const float* last = logits.data() + (want.size() - 1) * static_cast<size_t>(cfg.model.vocab);
    const int64_t best = std::max_element(last, last + cfg.model.vocab) - last;
    if (best == Vocab::kEnd) break;
    want.push_back(static_cast<uint8_t>(best));
  }
  EXPECT_EQ(letters(got[0].tokens), letters(want));
  EXPECT_EQ(letters(got[1].tokens), letters(got[0].tokens));  // greedy: the same protein twice
}

TEST_F(InferTools, GenerateIsReproducibleAndFollowsItsOptions) {
  const std::string args = "--checkpoint " + quoted(fx().causal) + " --num 3 --max-length 40 --top-k 10 --top-p 0.95 ";
  ToolRun a = tool(PF_GENERATE_TOOL, args + "--seed 7 --output " + quoted(out("gen_a.fasta")));
  ASSERT_EQ(a.status, 0) << a.out;
  ToolRun b = tool(PF_GENERATE_TOOL, args + "--seed 7 --output " + quoted(out("gen_b.fasta")), 2);
  ASSERT_EQ(b.status, 0) << b.out;
  ToolRun c = tool(PF_GENERATE_TOOL, args + "--seed 8 --output " + quoted(out("gen_c.fasta")));
  ASSERT_EQ(c.status, 0) << c.out;
  const std::string ga = read_text(out("gen_a.fasta"));
  EXPECT_EQ(ga, read_text(out("gen_b.fasta")));  // same seed, one or two ranks
  EXPECT_NE(ga, read_text(out("gen_c.fasta")));
  // The output is FASTA that the readers accept; lengths within --max-length.
  SequenceReader reader(out("gen_a.fasta"));
  SequenceRecord rec;
  int count = 0;
  while (reader.next(rec)) {
    EXPECT_EQ(rec.id, "generated-" + std::to_string(count));
    EXPECT_LE(rec.tokens.size(), 40u);
    const bool ended = rec.header.find("stop=end") != std::string::npos;
    EXPECT_TRUE(ended || rec.tokens.size() == 40u) << rec.header;
    ++count;
  }
  EXPECT_EQ(count, 3);

  // Prompts: each record is continued --num times, starting with its residues.
  ToolRun p =
      tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --num 2 --max-length 5 --prompt " +
                                 quoted(fx().proteins) + " --temperature 0.5 --output " + quoted(out("gen_p.fasta")));
  ASSERT_EQ(p.status, 0) << p.out;
  // --num times the prompt records past 2^40 (it overflowed to a negative count, exit 0).
  ToolRun huge = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --num 4611686018427387904 --prompt " +
                                            quoted(fx().proteins) + " --output " + quoted(out("gen_huge.fasta")));
  EXPECT_EQ(huge.status, 2) << huge.out;
  EXPECT_NE(huge.out.find("--num 4611686018427387904 for"), std::string::npos) << huge.out;
  EXPECT_FALSE(std::filesystem::exists(out("gen_huge.fasta")));
  SequenceReader pr(out("gen_p.fasta"));
  int k = 0;
  while (pr.next(rec)) {
    const SequenceRecord& prompt = fx().records[static_cast<size_t>(k / 2)];
    EXPECT_EQ(letters(rec.tokens).substr(0, prompt.tokens.size()), letters(prompt.tokens));
    EXPECT_LE(rec.tokens.size(), prompt.tokens.size() + 5);
    EXPECT_NE(rec.header.find("prompt=" + prompt.id), std::string::npos) << rec.header;
    ++k;
  }
  EXPECT_EQ(k, 2 * static_cast<int>(fx().records.size()));
}

// The output-path rule (data/output_path.h): each tool replaces an earlier
// output of its own kind and refuses (status 2, naming the option and path)
// anything else, which stays as it was.
TEST_F(InferTools, OutputsReplaceOnlyTheirOwnEarlierFiles) {
  const std::string score = "--checkpoint " + quoted(fx().causal) + " ";
  const std::string table = out("again.tsv"), residues = out("again_residues.h5"), emb = out("again_emb.h5"),
                    fasta = out("again.fasta");
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass);
    ToolRun r = tool(PF_SCORE_TOOL, score + "--output " + quoted(table) + " --per-residue " + quoted(residues) + " " +
                                        quoted(fx().proteins));
    EXPECT_EQ(r.status, 0) << r.out;
    r = tool(PF_EMBED_TOOL, score + "--output " + quoted(emb) + " " + quoted(fx().proteins));
    EXPECT_EQ(r.status, 0) << r.out;
    r = tool(PF_GENERATE_TOOL, score + "--num 1 --max-length 4 --output " + quoted(fasta));
    EXPECT_EQ(r.status, 0) << r.out;
  }
  // A TSV table may become JSONL and back.
  EXPECT_EQ(
      tool(PF_SCORE_TOOL, score + "--format jsonl --output " + quoted(table) + " " + quoted(fx().proteins)).status, 0);
  EXPECT_EQ(read_text(table).rfind("{\"id\":", 0), 0u);

  const std::string notes = out("notes.fasta");  // a user's FASTA file, not an input of these runs
  std::ofstream(notes) << ">mine\nMKV\n";
  const std::string assays = out("assays.jsonl");  // a user's JSONL with an id and a measure
  std::ofstream(assays) << "{\"id\":\"P1\",\"measure\":\"Tm\",\"value\":51.2}\n";
  struct Case {
    const char* exe;
    std::string args, target;
  };
  const std::vector<Case> cases = {
      {PF_SCORE_TOOL, "--output " + quoted(notes) + " " + quoted(fx().proteins), notes},
      {PF_SCORE_TOOL, "--format jsonl --output " + quoted(assays) + " " + quoted(fx().proteins), assays},
      {PF_SCORE_TOOL, "--output " + quoted(fx().masked) + " " + quoted(fx().proteins), fx().masked},
      {PF_SCORE_TOOL, "--per-residue " + quoted(emb) + " " + quoted(fx().proteins), emb},
      {PF_SCORE_TOOL, "--output " + quoted(fx().dir) + " " + quoted(fx().proteins), fx().dir},
      {PF_EMBED_TOOL, "--output " + quoted(residues) + " " + quoted(fx().proteins), residues},
      {PF_EMBED_TOOL, "--output " + quoted(fx().masked) + " " + quoted(fx().proteins), fx().masked},
      {PF_GENERATE_TOOL, "--num 1 --output " + quoted(notes), notes},
      {PF_GENERATE_TOOL, "--num 1 --output " + quoted(table), table},
  };
  const std::string masked_bytes = read_text(fx().masked), emb_bytes = read_text(emb),
                    residue_bytes = read_text(residues), table_bytes = read_text(table);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.exe) + " " + c.args);
    const ToolRun r = tool(c.exe, score + c.args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(" '" + c.target + "'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("refusing to replace it"), std::string::npos) << r.out;
  }
  const ToolRun both = tool(PF_SCORE_TOOL, score + "--output " + quoted(out("both")) + " --per-residue " +
                                               quoted(out("both")) + " " + quoted(fx().proteins));
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("are the same file: give each its own"), std::string::npos) << both.out;
  EXPECT_EQ(read_text(notes), ">mine\nMKV\n");
  EXPECT_EQ(read_text(assays), "{\"id\":\"P1\",\"measure\":\"Tm\",\"value\":51.2}\n");
  EXPECT_EQ(read_text(fx().masked), masked_bytes);
  EXPECT_EQ(read_text(emb), emb_bytes);
  EXPECT_EQ(read_text(residues), residue_bytes);
  EXPECT_EQ(read_text(table), table_bytes);
}

// A tool stopped by SIGTERM or SIGINT while it computes leaves nothing: its
// output is held in memory until the end (launch/core/output_file.h), so
// neither the final name nor a temporary file exists (the pseudo-log-
// likelihood of 500 proteins and 100,000 generated proteins take far longer
// than the second before the signal).
TEST_F(InferTools, ASignalDuringTheRunLeavesNoFile) {
  const std::string dir = out("signalled");
  std::filesystem::create_directories(dir);
  struct Case {
    const char* exe;
    std::string args, signal;
  };
  for (const Case& c :
       {Case{PF_SCORE_TOOL,
             "--checkpoint " + quoted(fx().masked) + " --output " + quoted(dir + "/s.tsv") + " --per-residue " +
                 quoted(dir + "/r.h5") + " " + kQuery,
             "TERM"},
        Case{PF_GENERATE_TOOL,
             "--checkpoint " + quoted(fx().causal) + " --num 100000 --output " + quoted(dir + "/g.fasta"), "INT"}}) {
    SCOPED_TRACE(c.exe);
    // (timeout runs the tool in the foreground: a background job of a shell
    // without job control would ignore SIGINT)
    const ToolRun r = run("OMP_NUM_THREADS=1 timeout --preserve-status -s " + c.signal + " 1 " + std::string(c.exe) +
                              " " + c.args + "; echo \"exit $?\"",
                          dir + "/log.txt");
    const int expected = 128 + (c.signal == "TERM" ? SIGTERM : SIGINT);
    EXPECT_NE(r.out.find("exit " + std::to_string(expected)), std::string::npos)
        << "not stopped by the signal: " << r.out;
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename() != "log.txt") left.push_back(e.path().filename().string());
    EXPECT_TRUE(left.empty()) << "left: " << left.front();
  }
}

TEST_F(InferTools, BadInputIsRefusedWithTheFileAndTheReason) {
  // A masked-LM checkpoint cannot generate.
  ToolRun r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().masked));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(fx().masked), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("masked-LM checkpoint"), std::string::npos) << r.out;

  // An unknown letter: the reader's error, with file, line, column and letter.
  const std::string bad = out("unknown_letter.fasta");
  std::ofstream(bad) << ">ok\nMKV\n>bad\nMKJL\n";
  for (const char* exe : {PF_SCORE_TOOL, PF_EMBED_TOOL}) {
    const std::string extra = exe == std::string(PF_EMBED_TOOL) ? " --output " + quoted(out("never.h5")) : "";
    r = tool(exe, "--checkpoint " + quoted(fx().causal) + extra + " " + quoted(bad));
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find(bad + ":4"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("'J'"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(out("never.h5")));
  r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --prompt " + quoted(bad));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("'J'"), std::string::npos) << r.out;
  // ... which --map-unknown-to-x reads as X, as performer-data does.
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --map-unknown-to-x " + quoted(bad));
  EXPECT_EQ(r.status, 0) << r.out;

  // An empty FASTA.
  const std::string empty = out("empty.fasta");
  std::ofstream(empty).flush();
  r = tool(PF_SCORE_TOOL,
           "--checkpoint " + quoted(fx().causal) + " --output " + quoted(out("never.tsv")) + " " + quoted(empty));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(empty), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out("never.tsv")));

  // A checkpoint of another vocabulary, for each tool.
  for (const char* exe : {PF_SCORE_TOOL, PF_EMBED_TOOL, PF_GENERATE_TOOL}) {
    const std::string extra = exe == std::string(PF_GENERATE_TOOL)
                                  ? ""
                                  : " --output " + quoted(out("never.h5")) + " " + quoted(fx().proteins);
    r = tool(exe, "--checkpoint " + quoted(fx().vocab33) + extra);
    EXPECT_EQ(r.status, 2) << exe << "\n" << r.out;
    EXPECT_NE(r.out.find(fx().vocab33 + ": checkpoint of another vocabulary: its token embedding has 33 rows"),
              std::string::npos)
        << r.out;
  }
  // A checkpoint whose tensors do not fit its configuration.
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().layout) + " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(fx().layout), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("another model layout"), std::string::npos) << r.out;
  // Not a checkpoint at all.
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().proteins) + " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(fx().proteins), std::string::npos) << r.out;

  // Usage errors.
  for (const char* exe : {PF_SCORE_TOOL, PF_EMBED_TOOL}) {
    r = tool(exe,
             "--checkpoint " + quoted(fx().causal) + " --output " + quoted(fx().causal) + " " + quoted(fx().proteins));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("refusing to write over it"), std::string::npos) << r.out;
  }
  r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --output " + quoted(fx().causal));
  EXPECT_EQ(r.status, 2) << r.out;
  const std::string text = out("proteins.txt.bak");
  std::filesystem::copy_file(fx().proteins, text, std::filesystem::copy_options::overwrite_existing);
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " " + quoted(text));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(text), std::string::npos) << r.out;
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " " + quoted(out("missing.fasta")));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no such file"), std::string::npos) << r.out;
  // A folder that exists is called a folder, with the option and the files it holds.
  const std::string folder = out("homologs");
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(fx().proteins, folder + "/fam.fasta", std::filesystem::copy_options::overwrite_existing);
  r = tool(PF_SCORE_TOOL,
           "--checkpoint " + quoted(fx().causal) + " --context " + quoted(folder) + " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--context: '" + folder + "' is a folder; --context takes FASTA / Swiss-Prot sequence files"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("name the files inside it (fam.fasta)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no such file"), std::string::npos) << r.out;
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " " + quoted(folder));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("input: '" + folder + "' is a folder"), std::string::npos) << r.out;
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --first-residue maybe " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--first-residue"), std::string::npos) << r.out;
  for (const std::string& prefix : {std::string("a b"), std::string("a\nc"), std::string("")}) {
    r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --id-prefix " + quoted(prefix));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("--id-prefix must be a non-empty word"), std::string::npos) << r.out;
  }
  r = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) + " --top-p 0");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--top-p"), std::string::npos) << r.out;
  r = tool(PF_EMBED_TOOL, "--checkpoint " + quoted(fx().causal) + " --layer 9 --output " + quoted(out("never.h5")) +
                              " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--layer"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pf
