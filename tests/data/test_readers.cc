// Vocabulary and FASTA / Swiss-Prot readers: the real files against an
// independent parse, and every malformed-input case with its error text.
#include <gtest/gtest.h>

#include "data/sequence_reader.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

std::string decode(const std::vector<uint8_t>& t) {
  std::string s;
  for (uint8_t x : t) s += Vocab::residue_letter(x);
  return s;
}

std::vector<SequenceRecord> read_records(const std::string& path, ReaderOptions opt = {}) {
  SequenceReader r(path, opt);
  std::vector<SequenceRecord> out;
  SequenceRecord rec;
  while (r.next(rec)) out.push_back(rec);
  return out;
}

// Expects a DataError/IoError whose text contains every piece.
template <typename Err>
void expect_error(const std::string& path, const std::vector<std::string>& pieces, ReaderOptions opt = {}) {
  try {
    read_records(path, opt);
    FAIL() << "no error for " << path;
  } catch (const Err& e) {
    for (const auto& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Vocab, TableAndCases) {
  EXPECT_EQ(Vocab::encode('A'), 4);
  EXPECT_EQ(Vocab::encode('a'), 4);
  EXPECT_EQ(Vocab::encode('Y'), 23);
  EXPECT_EQ(Vocab::encode('O'), 28);
  EXPECT_EQ(Vocab::encode('x'), 26);
  EXPECT_EQ(Vocab::encode('J'), Vocab::kInvalid);
  EXPECT_EQ(Vocab::encode('J', true), Vocab::encode('X'));
  EXPECT_EQ(Vocab::encode('1', true), Vocab::kInvalid);
  EXPECT_EQ(Vocab::encode(0xC3, true), Vocab::kInvalid);
  EXPECT_EQ(Vocab::description().substr(0, 26), "<pad>,<end>,<mask>,<unk>,A");
  for (int t = Vocab::kFirstResidue; t < Vocab::kSize; ++t)
    EXPECT_EQ(Vocab::encode(static_cast<unsigned char>(Vocab::residue_letter(static_cast<uint8_t>(t)))), t);
}

TEST(Readers, RealFastaMatchesIndependentParse) {
  for (const char* path : {test::kQueryFasta, test::kDbFasta}) {
    const auto ref = test::reference_fasta(path);
    const auto got = read_records(path);
    ASSERT_EQ(got.size(), ref.size()) << path;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(decode(got[i].tokens), ref[i].residues) << path << " record " << i;
      ASSERT_EQ(got[i].header, ref[i].header.substr(0, ref[i].header.find_last_not_of(" \t") + 1));
      ASSERT_EQ(got[i].id, ref[i].header.substr(0, ref[i].header.find(' ')));
    }
  }
}

TEST(Readers, RealSwissProtMatchesIndependentParse) {
  const auto ref = test::reference_swissprot(test::kSwissDat);
  const auto got = read_records(test::kSwissDat);
  ASSERT_EQ(got.size(), 100u);
  ASSERT_EQ(ref.size(), 100u);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(decode(got[i].tokens), ref[i].residues) << i;
  EXPECT_EQ(got[0].id, "sp|P15455|CRU4_ARATH");
  EXPECT_EQ(got[0].header, "sp|P15455|CRU4_ARATH 12S seed storage protein CRU4 OS=Arabidopsis thaliana (Mouse-ear cress)");
  EXPECT_EQ(got[0].tokens.size(), 472u);
}

TEST(Readers, GzipAndPlainAgreeAndCrlfAndLongLinesAreAccepted) {
  test::TempDir dir;
  std::string long_seq;
  for (int i = 0; i < 35000; ++i) long_seq += Vocab::kResidues[(i * 7) % 20];
  const std::string text = ">p1 first\r\nMKV\r\nlle*\r\n\r\n>p2 long\r\n" + long_seq + "\r\n";
  test::write_text(dir.file("a.fasta"), text);
  test::write_gz(dir.file("a.fasta.gz"), text);
  for (const char* name : {"a.fasta", "a.fasta.gz"}) {
    const auto got = read_records(dir.file(name));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].id, "p1");
    EXPECT_EQ(got[0].header, "p1 first");
    EXPECT_EQ(decode(got[0].tokens), "MKVLLE");
    EXPECT_EQ(decode(got[1].tokens), long_seq);
    EXPECT_EQ(got[1].line, 5);
  }
}

// Writes `text` to a file named `name` in a fresh temporary directory.
class BadInput : public ::testing::Test {
 protected:
  std::string file(const std::string& name, const std::string& text) {
    test::write_text(dir_.file(name), text);
    return dir_.file(name);
  }
  test::TempDir dir_;
};

TEST_F(BadInput, EmptyFileNamesIt) {
  expect_error<DataError>(file("empty.fa", ""), {"empty.fa", "no sequences"});
  expect_error<DataError>(file("blank.fa", "\n\n  \n"), {"blank.fa", "no sequences"});
  expect_error<DataError>(file("empty.dat", ""), {"empty.dat", "no sequences"});
}

TEST_F(BadInput, TextBeforeTheFirstHeaderGivesTheLine) {
  expect_error<DataError>(file("pre.fa", "\nhello\n>a\nMK\n"), {"pre.fa:2:", "before the first FASTA header"});
  expect_error<DataError>(file("pre.dat", "AC   P1;\n"), {"pre.dat:1:", "expected an ID line"});
}

TEST_F(BadInput, HeaderWithoutSequenceIsAnError) {
  expect_error<DataError>(file("noseq.fa", ">a\nMK\n>b desc\n>c\nMK\n"), {"noseq.fa:3:", "'b' has no sequence"});
  expect_error<DataError>(file("noseq_end.fa", ">a\nMK\n>b\n"), {"noseq_end.fa:3:", "'b' has no sequence"});
  expect_error<DataError>(file("noseq.dat", "ID   X_Y Reviewed; 3 AA.\nSQ   SEQUENCE\n//\n"),
                          {"noseq.dat:1:", "no sequence"});
}

// Bounded lines: a header is kept whole per protein (at most 64 KiB), and no
// line of a protein file reaches 16 MiB; both named by file and line before
// a larger line is held.
TEST_F(BadInput, OverlongHeadersAndLinesAreRefusedByLine) {
  const std::string header(70000, 'h');
  expect_error<DataError>(file("long_header.fa", ">a\nMK\n>" + header + "\nMK\n"),
                          {"long_header.fa:3:", "a header of 70001 bytes, more than 65536"});
  const std::string line((size_t{16} << 20) + 10, 'M');
  expect_error<DataError>(file("long_line.fa", ">a\n" + line + "\n"),
                          {"long_line.fa:2:", "a line longer than 16 MiB"});
}

TEST_F(BadInput, InvalidCharactersGiveLineColumnAndByte) {
  expect_error<DataError>(file("digit.fa", ">a\nMK\nMK1V\n"), {"digit.fa:3:", "column 3", "'1'", "'a'"});
  expect_error<DataError>(file("letter.fa", ">a\nMKJ\n"), {"letter.fa:2:", "column 3", "'J'", "--map-unknown-to-x"});
  expect_error<DataError>(file("star.fa", ">a\nMK*\nV\n"), {"star.fa:3:", "after the stop"});
}

TEST_F(BadInput, NonUtf8BytesGiveLineAndByte) {
  expect_error<DataError>(file("utf8seq.fa", ">a\nMK\xC3\xA9\n"), {"utf8seq.fa:2:", "column 3", "byte 0xC3"});
  expect_error<DataError>(file("utf8hdr.fa", ">a b\xFF c\nMK\n"), {"utf8hdr.fa:1:", "column 5", "byte 0xFF", "UTF-8"});
  expect_error<DataError>(file("utf8.dat", "ID   X_Y Reviewed; 3 AA.\nOS   Caf\xE9\nSQ   S\n     MK\n//\n"),
                          {"utf8.dat:2:", "byte 0xE9"});
}

// A NUL would cut the stored header and id short; other control bytes are
// no text either (tab is kept).
TEST_F(BadInput, ControlBytesInHeadersGiveLineAndColumn) {
  expect_error<DataError>(file("nul.fa", std::string(">ab\0cd tail\nMKV\n", 16)),
                          {"nul.fa:1:", "column 4", "byte 0x00", "control character"});
  expect_error<DataError>(file("bell.fa", ">a\nMK\n>b \x07x\nMK\n"), {"bell.fa:3:", "column 4", "byte 0x07"});
  expect_error<DataError>(file("esc.dat", "ID   X_Y Reviewed; 3 AA.\nDE   \x1b[1m\nSQ   S\n     MK\n//\n"),
                          {"esc.dat:2:", "byte 0x1B"});
  const auto tab = read_records(file("tab.fa", ">a\tb\nMK\n"));
  ASSERT_EQ(tab.size(), 1u);
  EXPECT_EQ(tab[0].header, "a\tb");
}

TEST_F(BadInput, UnterminatedSwissProtEntry) {
  expect_error<DataError>(file("open.dat", "ID   X_Y Reviewed; 3 AA.\nSQ   SEQUENCE\n     MKV\n"),
                          {"open.dat:1:", "not terminated"});
  // Cut before its SQ block, with the next entry after it: refused, not
  // read as one entry with the first one's name and the second's sequence.
  expect_error<DataError>(
      file("cut.dat",
           "ID   AAA_HUMAN Reviewed; 3 AA.\nAC   P00001;\nOS   Homo sapiens.\n"
           "ID   BBB_MOUSE Reviewed; 3 AA.\nAC   P00002;\nSQ   SEQUENCE\n     MKV\n//\n"),
      {"cut.dat:1:", "entry 'AAA_HUMAN' is not terminated by '//' before the next ID line (line 4)"});
}

TEST_F(BadInput, UnknownLettersMapToXOnRequestAndValidUtf8HeadersAreKept) {
  const auto ok = read_records(file("map.fa", ">a \xCE\xB1-helix\nMKJb\n"), ReaderOptions{true});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(decode(ok[0].tokens), "MKXB");
  EXPECT_EQ(ok[0].header, "a \xCE\xB1-helix");
}

TEST_F(BadInput, UnknownExtensionAndMissingFile) {
  EXPECT_THROW(SequenceReader(dir_.file("x.csv")), ValueError);
  EXPECT_THROW(SequenceReader(dir_.file("missing.fa")), IoError);
}

TEST(Readers, GzippedSwissProtReadsLikePlain) {
  test::TempDir dir;
  test::write_gz(dir.file("seq.dat.gz"), test::read_all(test::kSwissDat));
  const auto plain = read_records(test::kSwissDat), gz = read_records(dir.file("seq.dat.gz"));
  ASSERT_EQ(plain.size(), gz.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].header, gz[i].header);
    EXPECT_EQ(plain[i].tokens, gz[i].tokens);
  }
}

TEST(Readers, TruncatedGzipIsAnErrorNamingTheFile) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += ">s" + std::to_string(i) + "\nMKVLAAGICWQPERSTYV\n";
  test::write_gz(dir.file("full.fa.gz"), text);
  std::ifstream in(dir.file("full.fa.gz"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::write_text(dir.file("cut.fa.gz"), bytes.substr(0, bytes.size() / 2));
  expect_error<IoError>(dir.file("cut.fa.gz"), {"cut.fa.gz", "truncated gzip"});
}

}  // namespace
}  // namespace pf
