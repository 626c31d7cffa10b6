// performer-embed, performer-generate and the tools' outputs as a user runs
// them (infer_tools_fixture.h; the scoring cases are in test_infer_tools.cc,
// in the same binary):
//   embed writes ids, lengths, means [N, C] and per-residue rows whose mean is
//     the mean, the same on one and two ranks, packed as one protein at a time;
//   generate gives the same proteins for the same seed on one and two ranks,
//     other proteins for another seed, continues prompts, stops at
//     --max-length; exact softmax generates with a window only;
//   outputs replace only their own earlier files; a signal during a run
//     leaves no file;
//   bad input: a masked checkpoint given to generate, an unknown letter, an
//     empty FASTA, a checkpoint of another vocabulary or of another model
//     layout, an unknown extension and bad options: each refused with a
//     message naming the file (or option) and the reason, status 2 for usage
//     errors and 1 for malformed sequence files (as performer-data).
#include "tests/e2e/infer_tools_fixture.h"

namespace pf {
namespace {

using namespace infer_test;

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

  // <end> is not drawn before a protein's first residue: 200 proteins of at
  // most one residue, hot enough that <end> would come first in several,
  // are each one residue long (an empty record was written, which no reader
  // takes).
  ToolRun one = tool(PF_GENERATE_TOOL, "--checkpoint " + quoted(fx().causal) +
                                           " --num 200 --max-length 1 --temperature 3 --seed 1 --output " +
                                           quoted(out("gen_one.fasta")));
  ASSERT_EQ(one.status, 0) << one.out;
  SequenceReader ones(out("gen_one.fasta"));
  count = 0;
  while (ones.next(rec)) {
    EXPECT_EQ(rec.tokens.size(), 1u) << rec.header;
    EXPECT_NE(rec.header.find("stop=max_length"), std::string::npos) << rec.header;
    ++count;
  }
  EXPECT_EQ(count, 200);

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
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().masked) + " --first-residue scored " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--first-residue scored applies to causal checkpoints"), std::string::npos) << r.out;
  // Options that take one value: --context and --set never swallow the
  // inputs that follow them (two files after --context: one homolog file,
  // one input, and the table scores the input's proteins only).
  const std::string again = out("again.fasta");
  std::filesystem::copy_file(fx().proteins, again, std::filesystem::copy_options::overwrite_existing);
  const std::string first = "\n" + fx().records.front().id + "\t";  // a table row of the first protein
  auto rows_of_first = [&](const std::string& text) {
    int rows = 0;
    for (size_t at = text.find(first); at != std::string::npos; at = text.find(first, at + 1)) ++rows;
    return rows;
  };
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --context " + quoted(fx().proteins) + " " +
                              quoted(again) + " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(rows_of_first(r.out), 2) << "--context took an input: " << r.out;
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --set parallel.timeout_s=60 " + quoted(again) +
                              " " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(rows_of_first(r.out), 2) << "--set took an input: " << r.out;
  r = tool(PF_SCORE_TOOL, "--checkpoint " + quoted(fx().causal) + " --context-mode cached " + quoted(fx().proteins));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--context-mode requires --context"), std::string::npos) << r.out;
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
