// Every reader of a data file's split checks its offsets before it trusts
// one (PreparedData::open_split, data/prepared_data.h): a crafted
// /train/offsets (an entry 3e9 past the tokens, a negative entry, one below
// its predecessor) makes the loader, `performer-data info` (read_dataset_info) and the
// leakage audit stop with a DataError naming the file, the split and the
// entry, before they allocate what the offsets claim: each runs in a child
// process under a 1 GiB address-space limit that the unchecked audit (2.9 GB
// for a gap of 3e9) exceeds. A split with no protein is named when a loader
// reads it; tokens of another type or outside the vocabulary are named.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "data/audit.h"
#include "data/h5.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"
#include "tests/support/address_space.h"

namespace pf {
namespace {

// fn in a child whose address space may grow by 1 GiB at most: true when it
// threw a DataError naming every piece (the child's verdict is its exit
// status).
bool refused_in_child(const std::function<void()>& fn, const std::vector<std::string>& pieces) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!test::cap_address_space(int64_t{1} << 30)) _exit(4);
    try {
      fn();
    } catch (const DataError& e) {
      const std::string m = e.what();
      for (const std::string& p : pieces)
        if (m.find(p) == std::string::npos) _exit(3);
      _exit(0);
    } catch (...) {
      _exit(2);
    }
    _exit(1);
  }
  int raw = 0;
  waitpid(pid, &raw, 0);
  return WIFEXITED(raw) && WEXITSTATUS(raw) == 0;
}

// QUERY.fasta.gz prepared into `name` under `dir` (sequence-hash split); its path.
std::string prepared_query(const test::TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.output = path;
  prepare_dataset(o);
  return path;
}

// /train/<name> of a prepared file, as stored.
template <typename T>
std::vector<T> train_dataset(const std::string& path, const std::string& name) {
  H5Id f = h5_open_file(path);
  return h5_read_array<T>(H5Id(h5_open_group(f, "train")), name);
}

// Replaces /train/<name> by `values` (of their own type).
template <typename T>
void replace_train_dataset(const std::string& path, const std::string& name, const std::vector<T>& values) {
  H5Id f = h5_open_file(path, true);
  H5Id g = h5_open_group(f, "train");
  H5Ldelete(g, name.c_str(), H5P_DEFAULT);
  h5_write_vector(g, name, values);
}

// Replaces /train/<name> by a chunked dataset of n elements of `type` that is
// declared and never written (it would read as `fill`, or 0).
void replace_with_unwritten(const std::string& path, const std::string& name, hid_t type, hsize_t n,
                            const void* fill = nullptr, hid_t fill_type = H5T_NATIVE_UINT8) {
  H5Id f = h5_open_file(path, true);
  H5Id g = h5_open_group(f, "train");
  H5Ldelete(g, name.c_str(), H5P_DEFAULT);
  const hsize_t chunk = std::min<hsize_t>(n, 1 << 16);
  H5Id space(H5Screate_simple(1, &n, nullptr));
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl, 1, &chunk);
  if (fill) H5Pset_fill_value(dcpl, fill_type, fill);
  H5Id d(H5Dcreate2(g, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  ASSERT_GE(d.get(), 0);
}

// `performer-data info` and a loader in `mode` each refuse `path` with every piece.
void expect_info_and_loader_refuse(const std::string& path, const std::vector<std::string>& pieces,
                                   SampleMode mode = SampleMode::Concat) {
  EXPECT_TRUE(refused_in_child([&] { read_dataset_info(path); }, pieces)) << "info";
  EXPECT_TRUE(refused_in_child(
      [&] {
        LoaderOptions lo;
        lo.files = {path};
        lo.sample_length = 256;
        lo.mode = mode;
        DataLoader loader(lo);
      },
      pieces))
      << "loader";
}

TEST(SplitChecks, CraftedOffsetsAreRefusedByEveryReaderBeforeTheyAllocate) {
  test::TempDir dir;
  const std::string path = prepared_query(dir, "crafted.h5");
  const std::vector<int64_t> good = train_dataset<int64_t>(path, "offsets");
  struct Case {
    int64_t index, value;
    std::string says;
  };
  for (const Case& c : {Case{1, 3000000000, "is outside [0, "}, Case{1, -5, "is outside [0, "},
                        Case{3, good[1], "is below offsets[2]"}, Case{3, good[2], "sequence 2 is empty"}}) {
    SCOPED_TRACE(c.says + " at " + std::to_string(c.index));
    std::vector<int64_t> bad = good;
    bad[static_cast<size_t>(c.index)] = c.value;
    replace_train_dataset(path, "offsets", bad);
    const std::vector<std::string> pieces = {"'" + path + "' /train/offsets", "offsets[" + std::to_string(c.index) +
                                                                                  "]", c.says};
    EXPECT_TRUE(refused_in_child(
        [&] {
          AuditOptions a;
          a.path = path;
          a.mmseqs.program = "/nonexistent/mmseqs";  // never reached
          run_audit(a);
        },
        pieces))
        << "audit";
    expect_info_and_loader_refuse(path, pieces);
  }
}

// A split declaring 2^26 sequences over the residues of 500 (offsets of
// 2^26 + 1 entries, declared and never written: HDF5 reads its fill value 0,
// so every sequence would be empty): refused from the group's counts before
// a block of offsets is read or anything per sequence is allocated.
TEST(SplitChecks, MoreSequencesThanResiduesAreRefusedBeforeAnyIsRead) {
  test::TempDir dir;
  const std::string path = prepared_query(dir, "empty_proteins.h5");
  const int64_t sequences = int64_t{1} << 26;
  replace_with_unwritten(path, "offsets", H5T_STD_I64LE, static_cast<hsize_t>(sequences + 1));
  {
    H5Id f = h5_open_file(path, true);
    H5Id g = h5_open_group(f, "train");
    H5Adelete(g, "sequences");
    h5_write_attr_int64(g, "sequences", sequences);
  }
  EXPECT_LT(std::filesystem::file_size(path), 1u << 20);
  expect_info_and_loader_refuse(
      path, {"'" + path + "' /train", "records 67108864 sequences but only", "no empty sequence"});
}

// /train/tokens declared at its length but never written (HDF5 would read its
// fill value: every residue the same letter): refused by every reader, naming
// the dataset and what is stored, before training could learn from it.
TEST(SplitChecks, TokensDeclaredButNeverWrittenAreRefused) {
  test::TempDir dir;
  const std::string path = prepared_query(dir, "unwritten.h5");
  const std::vector<uint8_t> tokens = train_dataset<uint8_t>(path, "tokens");
  const uint8_t letter = 4;
  replace_with_unwritten(path, "tokens", H5T_STD_U8LE, tokens.size(), &letter);
  expect_info_and_loader_refuse(path, {"/train/tokens", path, "the file stores only 0 of them"});
}

// Tokens stored as another integer type (HDF5 would convert int8 -3 to 253
// silently), or a value outside the vocabulary: a DataError naming the file,
// the dataset and (for a value) the index and the value.
TEST(SplitChecks, TokensOfAnotherTypeOrOutsideTheVocabularyAreNamed) {
  test::TempDir dir;
  const std::string path = prepared_query(dir, "tokens.h5");
  const std::vector<uint8_t> good = train_dataset<uint8_t>(path, "tokens");
  LoaderOptions lo;
  lo.files = {path};
  lo.sample_length = 64;
  replace_train_dataset(path, "tokens", std::vector<int8_t>(good.begin(), good.end()));
  try {
    DataLoader loader(lo);
    ADD_FAILURE() << "int8 tokens were read";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + path + "' /train/tokens holds signed 8-bit integers"), std::string::npos) << m;
  }
  replace_train_dataset(path, "tokens", std::vector<uint8_t>(good.size(), 40));
  try {
    DataLoader loader(lo);
    loader.next();
    ADD_FAILURE() << "a token of 40 was read";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + path + "' /train/tokens["), std::string::npos) << m;
    EXPECT_NE(m.find("] = 40 is not a token of the vocabulary (0-28)"), std::string::npos) << m;
  }
  for (const uint8_t control : {Vocab::kPad, Vocab::kEnd, Vocab::kMask}) {
    std::vector<uint8_t> bad = good;
    for (size_t i = 5; i < bad.size(); i += 31) bad[i] = control;  // within any sample the loader reads
    replace_train_dataset(path, "tokens", bad);
    try {
      DataLoader loader(lo);
      loader.next();
      ADD_FAILURE() << "a control token " << int{control} << " inside a protein was read";
    } catch (const DataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'" + path + "' /train/tokens["), std::string::npos) << m;
      EXPECT_NE(m.find("] = " + std::to_string(control) + " is " + Vocab::token_text(control) +
                       ", a control token, inside a protein"),
                std::string::npos)
          << m;
    }
  }
}

// A split with no protein (--val-fraction 0) read in packed, cluster-sampled
// or family mode: a DataError naming the split and the file.
TEST(SplitChecks, AnEmptySplitIsNamed) {
  test::TempDir dir;
  const std::string path = dir.file("no_valid.h5");
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.output = path;
  o.val_fraction = 0;
  o.cluster.identity = 0.5;
  prepare_dataset(o);
  struct Case {
    SampleMode mode;
    Sampling sampling;
    std::string says;
  };
  for (const Case& c : {Case{SampleMode::Packed, Sampling::Sequence, "holds no protein to pack"},
                        Case{SampleMode::Packed, Sampling::Cluster, "holds no protein to sample clusters from"},
                        Case{SampleMode::Family, Sampling::Sequence, "holds no protein to sample families from"}}) {
    SCOPED_TRACE(c.says);
    LoaderOptions lo;
    lo.files = {path};
    lo.split = "valid";
    lo.mode = c.mode;
    lo.sampling = c.sampling;
    lo.sample_length = 256;
    try {
      DataLoader loader(lo);
      ADD_FAILURE() << "an empty split was read";
    } catch (const DataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("split 'valid' of " + path), std::string::npos) << m;
      EXPECT_NE(m.find(c.says), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace pf
