// The fixture of the inference tools' tests (test_infer_tools.cc: scoring;
// test_infer_tools_outputs.cc: embeddings, generation, output files, signals
// and bad input): checkpoints of randomly initialised tiny models, short
// proteins of QUERY.fasta.gz and a titin-length one, written once per
// process into a temporary folder (fixture()), and the InferTools test
// class that runs a tool on one or several ranks.
#pragma once

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

namespace pf::infer_test {

using test::set_override;
using test::set_overrides;

constexpr const char* kQuery = "/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz";

using test::quoted;
using test::ToolRun;
inline ToolRun run(const std::string& cmd, const std::string& log) { return test::run_tool(cmd, log); }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> tiny_model(const std::string& objective) {
  return {"model.layers=2",    "model.width=32",        "model.heads=2",      "model.ffn=64",
          "model.features=16", "model.chunk=16",        "model.init_std=0.1", "model.objective=\"" + objective + "\"",
          "data.batch_size=4", "data.sample_length=256"};
}

// A checkpoint of a randomly initialised model: configuration `sets`, whose
// stored text it carries, and tensors of `shape` (the model of `sets` unless
// a test wants tensors that do not fit it).
inline void write_random_checkpoint(const std::string& path, const std::vector<std::string>& sets,
                                    const ModelConfig& shape) {
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

inline ModelConfig model_of(const std::vector<std::string>& sets) { return load_train_config("", sets).model; }

// Proteins of QUERY.fasta.gz between 30 and 200 residues (distinct), as FASTA.
inline std::vector<SequenceRecord> short_proteins(int64_t count) {
  SequenceReader reader(kQuery);
  std::vector<SequenceRecord> out;
  SequenceRecord rec;
  while (static_cast<int64_t>(out.size()) < count && reader.next(rec))
    if (rec.tokens.size() >= 30 && rec.tokens.size() <= 200) out.push_back(rec);
  return out;
}

inline std::string letters(const std::vector<uint8_t>& tokens) {
  std::string s;
  for (uint8_t t : tokens) s += Vocab::residue_letter(t);
  return s;
}

inline void write_fasta(const std::string& path, const std::vector<SequenceRecord>& recs) {
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

inline const Fixture& fixture() {
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

inline std::vector<Row> parse_tsv(const std::string& text) {
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

}  // namespace pf::infer_test
