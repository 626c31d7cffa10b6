// performer-score as a user runs it (the executable in child processes,
// under mpiexec for several ranks), on checkpoints written from randomly
// initialised tiny models (infer_tools_fixture.h):
//   score (causal, --first-residue context) gives performer-eval's loss on
//     the same proteins (eval --fasta with data.mode = "single"); one and two
//     ranks agree, TSV and JSONL agree, the per-residue HDF5 sums to the totals;
//   score (masked) is the pseudo-log-likelihood: one forward per masked
//     residue, computed here with the model, agrees with the tool's, on one
//     and on two ranks;
//   a synthetic titin-length protein (35,213 residues) scores the same on
//     four ranks and on one; packed proteins score as one at a time, and a
//     windowed checkpoint on two ranks as on one (embeddings too), packs
//     shorter than the ranks on four as on one; a window longer than any
//     protein costs only the tokens run (scoring and generation).
// The embedding, generation, output-file, signal and bad-input cases are in
// test_infer_tools_outputs.cc, in the same binary. The .async entry runs the
// multi-rank cases with PF_CPU_STREAMS passed to every rank (asynchronous
// jittered CPU streams): the same checks hold.
#include "tests/e2e/infer_tools_fixture.h"

namespace pf {
namespace {

using namespace infer_test;

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

// Two embedding files (performer-embed --per-residue) that agree.
void expect_same_embeddings(const std::string& a, const std::string& b, const std::string& what) {
  H5Id fa = h5_open_file(a), fb = h5_open_file(b);
  EXPECT_EQ(h5_read_strings(fb, "ids"), h5_read_strings(fa, "ids")) << what;
  EXPECT_LT(test::rel_l2(h5_read_array<float>(fb, "mean"), h5_read_array<float>(fa, "mean")), 1e-5) << what;
  EXPECT_LT(test::rel_l2(h5_read_array<float>(h5_open_group(fb, "residues"), "embeddings"),
                         h5_read_array<float>(h5_open_group(fa, "residues"), "embeddings")),
            1e-5)
      << what;
}

// A windowed checkpoint (model.window = 64: each rank's window reaches 63
// rows into its neighbour's) on 2 ranks, with proteins shorter than
// 2 x 63 positions among them (5 residues the shortest): the same scores and
// embeddings as on 1 rank (the row is padded with a filler of its own),
// causal and masked, one at a time and packed, and scores given a context
// (cached and one pass).
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
    for (const std::string mode : {"", " --pack 400"}) {
      std::string files[2];
      for (int ranks : {1, 2}) {
        const std::string file = out("windowed_" + objective + "_" + std::to_string(ranks) + ".h5");
        files[ranks - 1] = file;
        const ToolRun r = tool(
            PF_EMBED_TOOL,
            "--checkpoint " + quoted(ckpt) + mode + " --per-residue --output " + quoted(file) + " " + quoted(fasta),
            ranks);
        ASSERT_EQ(r.status, 0) << "embed " << objective << mode << " on " << ranks << " rank(s)\n" << r.out;
      }
      expect_same_embeddings(files[0], files[1], "embed " + objective + mode + ": 2 ranks against 1");
    }
  }
}

// Proteins of 1 and 2 residues packed on 3 and 4 ranks: a pack of fewer
// positions than ranks gets a filler, so that no rank is left without a row
// (the packed forward crashed when two 1-token proteins left ranks 0 and 2
// of 4 without one), and 3 ranks, which do not divide the checkpoint's
// data.sample_length of 256, are taken (only training cuts samples of it):
// scores (causal, masked, and given a context in one pass) and embeddings
// as on 1 rank.
TEST_F(InferTools, ShortPacksOnThreeAndFourRanksRunAsOnOne) {
  const std::string fasta = out("short_proteins.fasta"), context = out("short_context.fasta");
  std::ofstream(fasta) << ">one\nM\n>two\nK\n>three\nMK\n";
  std::ofstream(context) << ">c\nMV\n";
  struct Case {
    std::string checkpoint, options;
  };
  const std::vector<Case> cases = {{fx().causal, " --pack 2 --first-residue context"},  // one token each
                                   {fx().masked, " --pack 2"},
                                   {fx().causal, " --context " + quoted(context) + " --context-mode one-pass"}};
  for (const Case& c : cases) {
    std::string one;
    for (int ranks : {1, 3, 4}) {
      const std::string table = out("short_" + std::to_string(ranks) + ".tsv");
      const ToolRun r =
          tool(PF_SCORE_TOOL,
               "--checkpoint " + quoted(c.checkpoint) + c.options + " --output " + quoted(table) + " " + quoted(fasta),
               ranks);
      ASSERT_EQ(r.status, 0) << c.options << " on " << ranks << " rank(s)\n" << r.out;
      if (ranks == 1)
        one = read_text(table);
      else
        expect_same_table(read_text(table), one, 1e-5,
                          c.checkpoint + c.options + ": " + std::to_string(ranks) + " ranks against 1");
    }
  }
  const std::string one = out("short_1.h5");
  for (int ranks : {1, 3, 4}) {
    const std::string file = out("short_" + std::to_string(ranks) + ".h5");
    const ToolRun r = tool(PF_EMBED_TOOL,
                           "--checkpoint " + quoted(fx().causal) + " --pack 4 --per-residue --output " + quoted(file) +
                               " " + quoted(fasta),
                           ranks);
    ASSERT_EQ(r.status, 0) << "embed on " << ranks << " rank(s)\n" << r.out;
    if (ranks > 1) expect_same_embeddings(one, file, "embed --pack 4: " + std::to_string(ranks) + " ranks against 1");
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

}  // namespace
}  // namespace pf
