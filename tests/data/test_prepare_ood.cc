// performer-data prepare --ood-organism: the OS= parse, routing of whole
// organisms to /ood (case-insensitive substring of the OS= value), headers
// without OS= split as usual, the counts (summary, group attributes, info),
// no /ood group without the option, and the loader reading split "ood".
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data/h5.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/schema.h"
#include "data/vocab.h"
#include "runtime/random.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

TEST(OodOrganism, ParsesTheOsField) {
  EXPECT_EQ(organism_of("sp|P1|A_DROME Protein X OS=Drosophila melanogaster OX=7227 GN=x PE=1 SV=2"),
            "Drosophila melanogaster");
  EXPECT_EQ(organism_of("tr|Q1|Q1_BRANA Uncharacterized OS=Brassica napus GN=BnaC03g PE=4 SV=1"), "Brassica napus");
  EXPECT_EQ(organism_of("x OS=Homo sapiens"), "Homo sapiens");
  EXPECT_EQ(organism_of("x OS=Human cytomegalovirus (strain AD169) OX=10360"), "Human cytomegalovirus (strain AD169)");
  EXPECT_EQ(organism_of("sp|P2|B_HUMAN no organism here"), "");
  EXPECT_EQ(organism_of("x CHAOS=Drosophila OX=1"), "");  // not a field: "OS=" inside a word
  EXPECT_EQ(organism_of("OS=Mus musculus OX=10090"), "Mus musculus");
}

TEST(OodOrganism, MatchesCaseInsensitiveSubstrings) {
  const std::vector<std::string> names = {"drosophila", "MYCOBACTERIUM tuberculosis"};
  EXPECT_TRUE(is_ood_organism("a OS=Drosophila melanogaster OX=7227", names));
  EXPECT_TRUE(is_ood_organism("a OS=Mycobacterium tuberculosis (strain H37Rv) OX=1", names));
  EXPECT_FALSE(is_ood_organism("a OS=Mycobacterium leprae OX=1", names));
  EXPECT_FALSE(is_ood_organism("a OS=Homo sapiens OX=9606 GN=DROSOPHILA", names));  // GN is not OS
  EXPECT_FALSE(is_ood_organism("a Drosophila-like protein, no organism field", names));
  EXPECT_FALSE(is_ood_organism("a OS=Drosophila melanogaster", {}));
}

std::string random_residues(uint64_t record, int64_t n) {
  const KeyedRandom rng(77, record, 0);
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += Vocab::kResidues[rng.draw(static_cast<uint64_t>(i)).v[0] % 20];
  return s;
}

struct TinyRecord {
  std::string header, residues;
  bool ood;
};

// 40 records: organisms cycle through held-out and kept ones, some without OS=.
std::vector<TinyRecord> tiny_records() {
  const char* organisms[] = {"OS=Drosophila melanogaster OX=7227",
                             "OS=Homo sapiens OX=9606",
                             "OS=DROSOPHILA simulans OX=7240",
                             "",
                             "OS=Mycobacterium bovis OX=1765",
                             "OS=Escherichia coli OX=562 GN=mycobacterium"};
  const bool held_out[] = {true, false, true, false, true, false};
  std::vector<TinyRecord> out;
  for (int i = 0; i < 40; ++i) {
    const int k = i % 6;
    out.push_back({"sp|P" + std::to_string(i) + "|T" + std::to_string(i) + " Test protein " + organisms[k] + " PE=1",
                   random_residues(static_cast<uint64_t>(i), 20 + (i * 7) % 31), held_out[k]});
  }
  return out;
}

std::string fasta_of(const std::vector<TinyRecord>& recs) {
  std::string text;
  for (const auto& r : recs) text += ">" + r.header + "\n" + r.residues + "\n";
  return text;
}

// tiny_records() written to dir as tiny.fasta, prepared into tiny.h5.
PrepareOptions tiny_options(const test::TempDir& dir) {
  test::write_text(dir.file("tiny.fasta"), fasta_of(tiny_records()));
  PrepareOptions opt;
  opt.inputs = {dir.file("tiny.fasta")};
  opt.output = dir.file("tiny.h5");
  return opt;
}

std::vector<std::string> split_sequences(hid_t file, const char* split) {
  H5Id g = h5_open_group(file, split);
  const auto tokens = h5_read_array<uint8_t>(g, "tokens");
  const auto offsets = h5_read_array<int64_t>(g, "offsets");
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::string s;
    for (int64_t t = offsets[i]; t < offsets[i + 1]; ++t) s += Vocab::kResidues[tokens[static_cast<size_t>(t)] - Vocab::kFirstResidue];
    out.push_back(s);
  }
  return out;
}

TEST(OodOrganism, PrepareRoutesWholeOrganismsToOod) {
  test::TempDir dir;
  const auto recs = tiny_records();
  test::write_text(dir.file("tiny.fasta"), fasta_of(recs));
  PrepareOptions opt;
  opt.inputs = {dir.file("tiny.fasta")};
  opt.output = dir.file("tiny.h5");
  opt.val_fraction = 0.2;
  opt.test_fraction = 0.2;
  opt.seed = 5;
  opt.ood_organisms = {"drosophila", "Mycobacterium"};
  const PrepareSummary sum = prepare_dataset(opt);

  std::vector<std::string> expect_ood, expect_split[3];
  int64_t ood_residues = 0;
  for (const auto& r : recs) {
    if (r.ood) {
      expect_ood.push_back(r.residues);
      ood_residues += static_cast<int64_t>(r.residues.size());
    } else {
      std::vector<uint8_t> tok;
      for (char c : r.residues) tok.push_back(Vocab::encode(static_cast<unsigned char>(c)));
      expect_split[split_of(tok.data(), static_cast<int64_t>(tok.size()), opt.seed, opt.val_fraction,
                            opt.test_fraction)]
          .push_back(r.residues);
    }
  }
  ASSERT_EQ(expect_ood.size(), 20u);  // records with i % 6 in {0, 2, 4}
  H5Id file = h5_open_file(opt.output);
  EXPECT_EQ(split_sequences(file, kOodSplitName), expect_ood);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(split_sequences(file, kSplitNames[s]), expect_split[s]) << kSplitNames[s];
    EXPECT_EQ(sum.splits[s].sequences, static_cast<int64_t>(expect_split[s].size()));
  }
  EXPECT_EQ(sum.ood.sequences, 20);
  EXPECT_EQ(sum.ood.residues, ood_residues);
  EXPECT_EQ(sum.lengths.count, 40);
  H5Id g = h5_open_group(file, kOodSplitName);
  EXPECT_EQ(h5_read_attr_int64(g, "sequences"), 20);
  EXPECT_EQ(h5_read_attr_int64(g, "residues"), ood_residues);
  EXPECT_EQ(h5_read_attr_strings(file, "ood_organisms"), opt.ood_organisms);
  for (const auto& h : h5_read_strings(g, "headers")) EXPECT_TRUE(is_ood_organism(h, opt.ood_organisms)) << h;
  EXPECT_EQ(h5_read_attr_int64(file, "schema_version"), kSchemaVersion);
  g.close();
  file.close();

  const DatasetInfo info = read_dataset_info(opt.output);
  EXPECT_EQ(info.ood.sequences, 20);
  EXPECT_EQ(info.ood.residues, ood_residues);
  EXPECT_EQ(info.ood_organisms, opt.ood_organisms);
  EXPECT_NE(format_summary(sum).find("ood: 20 sequences"), std::string::npos) << format_summary(sum);
  EXPECT_NE(format_info(info).find("ood: 20 sequences"), std::string::npos) << format_info(info);
  // Per name: drosophila 14 (i % 6 in {0, 2}), Mycobacterium 6 (i % 6 == 4);
  // 7 headers without OS= (i % 6 == 3).
  const std::vector<std::pair<std::string, int64_t>> matches = {{"drosophila", 14}, {"Mycobacterium", 6}};
  EXPECT_EQ(sum.ood_matches, matches);
  EXPECT_EQ(sum.without_organism, 7);
  EXPECT_NE(format_summary(sum).find("(held-out organisms: 'drosophila' 14 'Mycobacterium' 6)"), std::string::npos)
      << format_summary(sum);
  EXPECT_EQ(format_summary(sum).find("warning"), std::string::npos) << format_summary(sum);
}

// A name that matches no organism (misspelt, or headers without OS=) is
// said in the summary, with how many headers have no OS= field.
TEST(OodOrganism, ANameThatMatchesNothingIsAWarningInTheSummary) {
  test::TempDir dir;
  PrepareOptions opt = tiny_options(dir);
  opt.ood_organisms = {"Drosophila", "Arabidopsis"};
  const PrepareSummary sum = prepare_dataset(opt);
  EXPECT_EQ(sum.ood.sequences, 14);
  const std::string text = format_summary(sum);
  EXPECT_NE(text.find("warning: --ood-organism 'Arabidopsis' matched no sequence (7 of the kept sequences have no "
                      "OS= field in their header)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("'Drosophila' matched no"), std::string::npos) << text;
  opt.ood_organisms = {"Arabidopsis"};  // nothing held out: the empty split and the warning
  const std::string none = format_summary(prepare_dataset(opt));
  EXPECT_NE(none.find("ood: 0 sequences, 0 residues (held-out organisms: 'Arabidopsis' 0)"), std::string::npos) << none;
  EXPECT_NE(none.find("warning: --ood-organism 'Arabidopsis' matched no sequence"), std::string::npos) << none;
}

TEST(OodOrganism, WithoutTheOptionThereIsNoOodGroup) {
  test::TempDir dir;
  PrepareOptions opt = tiny_options(dir);
  const PrepareSummary sum = prepare_dataset(opt);
  EXPECT_EQ(sum.ood.sequences, 0);
  EXPECT_EQ(sum.splits[0].sequences + sum.splits[1].sequences + sum.splits[2].sequences, 40);
  H5Id file = h5_open_file(opt.output);
  EXPECT_FALSE(h5_exists(file, kOodSplitName));
  EXPECT_FALSE(h5_has_attr(file, "ood_organisms"));
  file.close();
  EXPECT_TRUE(read_dataset_info(opt.output).ood_organisms.empty());
  LoaderOptions lo;
  lo.files = {opt.output};
  lo.split = "ood";
  EXPECT_THROW(DataLoader{lo}, DataError);
  opt.ood_organisms = {""};
  EXPECT_THROW(prepare_dataset(opt), ValueError);
}

TEST(OodOrganism, LoaderReadsTheOodSplit) {
  test::TempDir dir;
  const auto recs = tiny_records();
  test::write_text(dir.file("tiny.fasta"), fasta_of(recs));
  PrepareOptions opt;
  opt.inputs = {dir.file("tiny.fasta")};
  opt.output = dir.file("tiny.h5");
  opt.ood_organisms = {"DROSOPHILA", "mycobacterium"};
  prepare_dataset(opt);
  LoaderOptions lo;
  lo.files = {opt.output};
  lo.split = "ood";
  lo.mode = SampleMode::Single;
  lo.sample_length = 64;  // longer than every record + <end>
  lo.batch_size = 4;
  lo.shuffle = false;
  lo.prefetch = 0;
  DataLoader loader(lo);
  ASSERT_EQ(loader.samples_per_epoch(), 20);
  std::vector<std::string> got;
  for (int64_t step = 0; step < loader.steps_per_epoch(); ++step) {
    const Batch b = loader.next();
    for (int64_t r = 0; r < b.batch_size; ++r) {
      if (!b.samples[static_cast<size_t>(r)].valid) continue;
      std::string s;
      int64_t i = 0;
      for (; i < b.slice_length; ++i) {
        const uint8_t t = b.tokens[static_cast<size_t>(r * b.slice_length + i)];
        if (t == Vocab::kEnd) break;
        s += Vocab::kResidues[t - Vocab::kFirstResidue];
      }
      EXPECT_LT(i, b.slice_length);
      got.push_back(s);
    }
  }
  std::vector<std::string> expect;
  for (const auto& r : recs)
    if (r.ood) expect.push_back(r.residues);
  EXPECT_EQ(got, expect);
}

}  // namespace
}  // namespace pf
