// performer-data prepare: counts against an independent parse of the real
// files, a full round trip of every sequence, duplicate removal, the split
// rule, determinism, the temporary-file discipline and schema checks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "data/h5.h"
#include "data/prepared_data.h"
#include "data/schema.h"
#include "data/scratch_folder.h"
#include "data/vocab.h"
#include "runtime/random.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

std::vector<test::RefRecord> all_reference_records() {
  std::vector<test::RefRecord> all;
  for (const char* p : {test::kDbFasta, test::kQueryFasta}) {
    auto r = test::reference_fasta(p);
    all.insert(all.end(), r.begin(), r.end());
  }
  auto sp = test::reference_swissprot(test::kSwissDat);
  all.insert(all.end(), sp.begin(), sp.end());
  return all;
}

struct SplitContents {
  std::vector<std::string> sequences, ids, headers;
};

SplitContents read_split(hid_t file, const char* split) {
  H5Id g = h5_open_group(file, split);
  const auto tokens = h5_read_array<uint8_t>(g, "tokens");
  const auto offsets = h5_read_array<int64_t>(g, "offsets");
  SplitContents c;
  c.ids = h5_read_strings(g, "ids");
  c.headers = h5_read_strings(g, "headers");
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::string s;
    for (int64_t k = offsets[i]; k < offsets[i + 1]; ++k) s += Vocab::residue_letter(tokens[static_cast<size_t>(k)]);
    c.sequences.push_back(s);
  }
  EXPECT_EQ(c.ids.size(), c.sequences.size());
  EXPECT_EQ(c.headers.size(), c.sequences.size());
  return c;
}

TEST(Prepare, CountsMatchAnIndependentCountOfTheRealFiles) {
  const auto& p = test::prepared_real();
  const auto ref = all_reference_records();
  std::set<std::string> unique;
  int64_t unique_residues = 0;
  for (const auto& r : ref)
    if (unique.insert(r.residues).second) unique_residues += static_cast<int64_t>(r.residues.size());
  EXPECT_EQ(p.summary.sequences_read, 20600);
  EXPECT_EQ(p.summary.sequences_read, static_cast<int64_t>(ref.size()));
  EXPECT_EQ(p.summary.duplicates_dropped, static_cast<int64_t>(ref.size() - unique.size()));
  // Identifiers held by more than one kept sequence: a FASTA header's first
  // word; a Swiss-Prot entry's name from its ID line (prepare records
  // sp|AC|NAME, and no FASTA header of these files names a Swiss-Prot entry
  // of seq.dat that way).
  auto id_of = [](const std::string& header) {
    if (header.rfind("ID ", 0) == 0) {
      std::istringstream words(header);
      std::string tag, name;
      words >> tag >> name;
      return "swissprot:" + name;
    }
    return header.substr(0, header.find_first_of(" \t"));
  };
  std::set<std::string> first_seen;
  std::map<std::string, int64_t> kept_per_id;
  for (const auto& r : ref)
    if (first_seen.insert(r.residues).second) ++kept_per_id[id_of(r.header)];
  int64_t shared_names = 0, shared_sequences = 0;
  for (const auto& [id, count] : kept_per_id)
    if (count > 1) ++shared_names, shared_sequences += count;
  EXPECT_EQ(p.summary.id_conflicts.names, shared_names);
  EXPECT_EQ(p.summary.id_conflicts.sequences, shared_sequences);
  int64_t kept = 0, residues = 0;
  for (const auto& s : p.summary.splits) {
    kept += s.sequences;
    residues += s.residues;
  }
  EXPECT_EQ(kept, static_cast<int64_t>(unique.size()));
  EXPECT_EQ(residues, unique_residues);
  EXPECT_EQ(p.summary.lengths.count, kept);
  EXPECT_EQ(p.summary.lengths.residues, unique_residues);
  EXPECT_GT(p.summary.splits[1].sequences, 0);
  EXPECT_GT(p.summary.splits[2].sequences, 0);

  const DatasetInfo info = read_dataset_info(p.path);
  EXPECT_EQ(info.schema, "performer-protein-v2");
  EXPECT_EQ(info.split_rule, "sequence");
  EXPECT_EQ(info.sources.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(info.splits[s].sequences, p.summary.splits[s].sequences);
  const std::string text = format_info(info);
  EXPECT_NE(text.find("performer-protein-v2"), std::string::npos);
  EXPECT_NE(text.find("split by sequence hash: unclustered;"), std::string::npos) << text;
  EXPECT_NE(text.find("p99"), std::string::npos);
}

TEST(Prepare, RoundTripRestoresEverySequenceInExactlyOneSplit) {
  const auto& p = test::prepared_real();
  H5Id file = h5_open_file(p.path);
  std::map<std::string, std::pair<int, std::string>> stored;  // sequence -> (split, header)
  for (int s = 0; s < 3; ++s) {
    const SplitContents c = read_split(file, kSplitNames[s]);
    for (size_t i = 0; i < c.sequences.size(); ++i) {
      EXPECT_TRUE(stored.emplace(c.sequences[i], std::make_pair(s, c.headers[i])).second)
          << "stored twice: " << c.ids[i];
      EXPECT_EQ(c.ids[i], c.headers[i].substr(0, c.headers[i].find(' ')));
      std::vector<uint8_t> t;
      for (char ch : c.sequences[i]) t.push_back(Vocab::encode(static_cast<unsigned char>(ch)));
      EXPECT_EQ(split_of(t.data(), static_cast<int64_t>(t.size()), 7, 0.05, 0.05), s);
    }
  }
  std::set<std::string> seen;
  for (const auto& r : all_reference_records()) {
    const auto it = stored.find(r.residues);
    ASSERT_NE(it, stored.end()) << "lost: " << r.header;
    if (seen.insert(r.residues).second && r.header.rfind("ID ", 0) != 0) {  // first occurrence keeps its header
      EXPECT_EQ(it->second.second, r.header.substr(0, r.header.find_last_not_of(' ') + 1));
    }
  }
  EXPECT_EQ(seen.size(), stored.size());
}

TEST(Prepare, DeterministicForASeedAndSplitsMoveWithTheSeed) {
  test::TempDir dir;
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.val_fraction = 0.2;
  o.test_fraction = 0.2;
  o.seed = 1;
  o.output = dir.file("a.h5");
  prepare_dataset(o);
  o.output = dir.file("b.h5");
  prepare_dataset(o);
  o.seed = 2;
  o.output = dir.file("c.h5");
  prepare_dataset(o);
  H5Id a = h5_open_file(dir.file("a.h5")), b = h5_open_file(dir.file("b.h5")), c = h5_open_file(dir.file("c.h5"));
  int64_t total_a = 0, total_c = 0;
  for (const char* s : kSplitNames) {
    const SplitContents sa = read_split(a, s), sb = read_split(b, s), sc = read_split(c, s);
    EXPECT_EQ(sa.sequences, sb.sequences);
    EXPECT_EQ(sa.ids, sb.ids);
    EXPECT_NE(sa.sequences, sc.sequences);
    total_a += static_cast<int64_t>(sa.sequences.size());
    total_c += static_cast<int64_t>(sc.sequences.size());
  }
  EXPECT_EQ(total_a, total_c);
}

TEST(Prepare, FailedRunLeavesNoFileAndUnknownLettersNeedTheFlag) {
  test::TempDir dir;
  test::write_text(dir.file("good.fa"), ">a\nMKV\n>b\nMKV\n>c\nWWW\n");
  test::write_text(dir.file("odd.fa"), ">j\nMKJ\n");
  PrepareOptions o;
  o.inputs = {dir.file("good.fa"), dir.file("odd.fa")};
  o.output = dir.file("out.h5");
  EXPECT_THROW(prepare_dataset(o), DataError);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".fa") << e.path();
  }
  EXPECT_EQ(files, 2);
  o.map_unknown_to_x = true;
  const PrepareSummary s = prepare_dataset(o);
  EXPECT_EQ(s.sequences_read, 4);
  EXPECT_EQ(s.duplicates_dropped, 1);
  EXPECT_EQ(s.lengths.count, 3);
  EXPECT_EQ(s.lengths.max, 3);
  EXPECT_TRUE(std::filesystem::exists(o.output));
  o.inputs = {dir.file("good.txt.zip")};
  EXPECT_THROW(prepare_dataset(o), ValueError);
}

TEST(Prepare, IdentifiersOfDifferentKeptSequencesAreCountedAndTheFirstNamed) {
  test::TempDir dir;
  // 'a' names MKV then MKW (kept, kept); 'c' repeats MKV (dropped), so
  // dropped records share nothing; 'b' names MKL twice (a repeat, dropped)
  // and MKK in the second file (kept).
  test::write_text(dir.file("x.fasta"), ">a one\nMKV\n>b\nMKL\n>a two\nMKW\n>c\nMKV\n>b\nMKL\n");
  test::write_text(dir.file("y.fa"), ">b\nMKK\n>a\nMKW\n>d\nMKD\n");
  PrepareOptions o;
  o.inputs = {dir.file("x.fasta"), dir.file("y.fa")};
  o.output = dir.file("out.h5");
  const PrepareSummary s = prepare_dataset(o);
  EXPECT_EQ(s.duplicates_dropped, 3);
  EXPECT_EQ(s.id_conflicts.names, 2);
  EXPECT_EQ(s.id_conflicts.sequences, 4);
  EXPECT_EQ(s.shared_id, "a");
  EXPECT_EQ(s.shared_id_places, dir.file("x.fasta") + ":1 and " + dir.file("x.fasta") + ":5");
  const std::string text = format_summary(s);
  EXPECT_NE(text.find("warning: 2 identifier(s) name more than one kept sequence (4 sequences), first 'a' at " +
                      s.shared_id_places),
            std::string::npos)
      << text;
  // The reuse that comes first in input order is named, here in the second
  // file; 'p', a repeat of 'q', is dropped and counts for nothing.
  test::write_text(dir.file("z.fa"), ">q\nMKQ\n>p\nMKQ\n>r\nMKR\n");
  test::write_text(dir.file("w.fa"), ">e\nMKE\n>r\nMKRR\n>q\nMKQQ\n");
  o.inputs = {dir.file("z.fa"), dir.file("w.fa")};
  o.output = dir.file("out2.h5");
  const PrepareSummary t = prepare_dataset(o);
  EXPECT_EQ(t.id_conflicts.names, 2);
  EXPECT_EQ(t.shared_id, "r");
  EXPECT_EQ(t.shared_id_places, dir.file("z.fa") + ":5 and " + dir.file("w.fa") + ":3");
  // Unique identifiers: no warning.
  o.inputs = {dir.file("z.fa")};
  o.output = dir.file("out3.h5");
  const PrepareSummary u = prepare_dataset(o);
  EXPECT_EQ(u.id_conflicts.names, 0);
  EXPECT_EQ(format_summary(u).find("warning"), std::string::npos);
}

TEST(Prepare, LengthPercentilesAreNearestRank) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= 1000; ++i) v.push_back(i * 10);
  v.push_back(9000);
  const LengthStats s = length_stats(v);
  EXPECT_EQ(s.count, 1001);
  EXPECT_EQ(s.p50, 5010);  // nearest rank ceil(0.5 * 1001) = 501 of the sorted values
  EXPECT_EQ(s.p99, 9900);  // rank 991: the repeated 9000 shifts the tail by one
  EXPECT_EQ(s.max, 10000);
  EXPECT_EQ(s.longer_than_8192, 182);
}

TEST(Prepare, WrongSchemaVersionIsRefused) {
  test::TempDir dir;
  {
    H5Id f = h5_create_file(dir.file("v3.h5"));
    h5_write_attr_string(f, "schema", "performer-protein-v3");
    h5_write_attr_int64(f, "schema_version", 3);
    h5_write_attr_string(f, "vocabulary", Vocab::description());
  }
  try {
    read_dataset_info(dir.file("v3.h5"));
    FAIL() << "no throw";
  } catch (const DataError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("performer-protein-v3"), std::string::npos) << w;
    EXPECT_NE(w.find("'performer-protein-v1' to 'performer-protein-v2'"), std::string::npos) << w;
    EXPECT_NE(w.find("v3.h5"), std::string::npos) << w;
  }
}

// A version-1 file (before split_rule and clusters) is read as a sequence
// split: the same counts, and info says so.
TEST(Prepare, VersionOneFileReadsAsUnclustered) {
  test::TempDir dir;
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.output = dir.file("v1.h5");
  o.val_fraction = 0.1;
  const PrepareSummary summary = prepare_dataset(o);
  {
    H5Id f = h5_open_file(o.output, true);
    ASSERT_GE(H5Adelete(f.get(), kSplitRuleAttr), 0);
    h5_write_attr_string(f, "schema", "performer-protein-v1");
    h5_write_attr_int64(f, "schema_version", 1);
  }
  const DatasetInfo info = read_dataset_info(o.output);
  EXPECT_EQ(info.schema_version, 1);
  EXPECT_EQ(info.split_rule, "sequence");
  for (int s = 0; s < 3; ++s) EXPECT_EQ(info.splits[s].sequences, summary.splits[s].sequences);
  EXPECT_NE(format_info(info).find("unclustered (schema version 1)"), std::string::npos) << format_info(info);
}

// Every sequence in one split, for evaluating a model on one's own file:
// val 0 + test 1 puts all in /test, val 1 + test 0 all in /valid (a sum of
// exactly 1 used to be refused); a sum above 1 is still refused.
TEST(Prepare, FractionsThatPutEverySequenceInOneSplit) {
  test::TempDir dir;
  const auto ref = test::reference_fasta(test::kQueryFasta);
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  for (const auto& [val, tst, only] : {std::make_tuple(0.0, 1.0, 2), std::make_tuple(1.0, 0.0, 1),
                                       std::make_tuple(0.0, 0.0, 0), std::make_tuple(0.25, 0.75, -1)}) {
    SCOPED_TRACE(testing::Message() << "val " << val << " test " << tst);
    o.val_fraction = val;
    o.test_fraction = tst;
    o.output = dir.file("one-" + std::to_string(val) + "-" + std::to_string(tst) + ".h5");
    const PrepareSummary s = prepare_dataset(o);
    const int64_t kept = s.splits[0].sequences + s.splits[1].sequences + s.splits[2].sequences;
    EXPECT_EQ(kept + s.duplicates_dropped, static_cast<int64_t>(ref.size()));
    if (only >= 0) {
      EXPECT_EQ(s.splits[only].sequences, kept);
    } else {
      EXPECT_EQ(s.splits[0].sequences, 0);  // val + test = 1: nothing left for train
      EXPECT_GT(s.splits[1].sequences, 0);
      EXPECT_GT(s.splits[2].sequences, 0);
    }
    const DatasetInfo info = read_dataset_info(o.output);
    EXPECT_EQ(info.val_fraction, val);
    EXPECT_EQ(info.test_fraction, tst);
  }
  o.val_fraction = 0.5;
  o.test_fraction = 0.6;
  o.output = dir.file("too_much.h5");
  try {
    prepare_dataset(o);
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

// The output may not be one of the inputs, whatever the spelling: the same
// path, "./" and ".." spellings, a symbolic link, a hard link. The input is
// left as it was.
TEST(Prepare, OutputThatIsAnInputIsRefusedAndTheInputKept) {
  test::TempDir dir;
  const std::string text = ">a\nMKV\n>b\nWWW\n";
  const std::string in = dir.file("in.fa");
  test::write_text(in, text);
  std::filesystem::create_directories(dir.file("sub"));
  std::filesystem::create_symlink(in, dir.file("link.fa"));
  std::filesystem::create_hard_link(in, dir.file("hard.fa"));
  const std::string other = dir.file("other.fa");
  test::write_text(other, ">c\nMMM\n");
  for (const std::string& out :
       {in, dir.path() + "/./in.fa", dir.path() + "/sub/../in.fa", dir.file("link.fa"), dir.file("hard.fa")}) {
    SCOPED_TRACE(out);
    PrepareOptions o;
    o.inputs = {other, in};  // the clash is with the second input
    o.output = out;
    try {
      prepare_dataset(o);
      FAIL() << "no throw";
    } catch (const ConfigError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("'" + out + "'"), std::string::npos) << w;
      EXPECT_NE(w.find("'" + in + "'"), std::string::npos) << w;
      EXPECT_NE(w.find("same file"), std::string::npos) << w;
    }
    EXPECT_EQ(test::read_all(in), text);
  }
  // Inputs given through a link clash with the output named directly.
  PrepareOptions o;
  o.inputs = {dir.file("link.fa")};
  o.output = in;
  EXPECT_THROW(prepare_dataset(o), ConfigError);
  EXPECT_EQ(test::read_all(in), text);
  // A different file is fine.
  o.inputs = {in};
  o.output = dir.file("out.h5");
  EXPECT_EQ(prepare_dataset(o).sequences_read, 2);
}

// A run killed before it could clean up (SIGKILL, a crash, a power cut)
// leaves OUT.tmp-<pid> (an HDF5 file) and scratch folders OUT.mmseqs-<pid>,
// OUT.sort-<pid> (with the scratch marker); the next prepare of OUT removes
// those of processes that no longer exist, and says so. Files of live
// processes, other names, and files or folders of the user's that only bear
// such a name (not HDF5, no marker) are left alone.
TEST(Prepare, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  test::TempDir dir;
  test::write_text(dir.file("in.fa"), ">a\nMKV\n");
  auto dead_pid = [] {
    const pid_t dead = fork();
    if (dead == 0) _exit(0);
    EXPECT_GT(dead, 0);
    EXPECT_EQ(waitpid(dead, nullptr, 0), dead);
    return std::to_string(dead);
  };
  const std::string dead = dead_pid(), dead2 = dead_pid(), dead3 = dead_pid(), dead4 = dead_pid();
  const std::string out = dir.file("out.h5");
  const std::string hdf5_start("\x89HDF\r\n\x1a\n", 8);
  const std::string stale = out + ".tmp-" + dead, stale_dir = out + ".mmseqs-" + dead;
  const std::string live = out + ".tmp-" + std::to_string(getppid());  // the process that started this test
  const std::vector<std::string> kept = {live, out + ".tmp-12ab", dir.file("other.h5.tmp-" + dead), out + ".tmp-",
                                         out + ".tmp-" + dead2};  // the last: the user's text, not HDF5
  test::write_text(stale, hdf5_start + "partial");
  std::filesystem::create_directories(stale_dir);
  test::write_text(stale_dir + "/" + ScratchFolder::kMarker, "");
  test::write_text(stale_dir + "/db", "mmseqs");
  const std::string users_dir = out + ".sort-" + dead2;  // no marker: the user's
  std::filesystem::create_directories(users_dir);
  test::write_text(users_dir + "/notes", "keep");
  for (const auto& k : kept) test::write_text(k, "keep");
  // A temporary whose pid is gone here but that a live process holds open
  // (a prepare in another pid namespace): its lock keeps it.
  const std::string held = out + ".tmp-" + dead3;
  test::write_text(held, hdf5_start + "being written");
  const int held_fd = ::open(held.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(held_fd, LOCK_SH), 0);
  // One written with HDF5's locking off (HDF5_USE_FILE_LOCKING=FALSE): the
  // writer's TemporaryFile holds a record lock on it, as here.
  const std::string recorded = out + ".tmp-" + dead4;
  test::write_text(recorded, hdf5_start + "being written too");
  const int recorded_fd = ::open(recorded.c_str(), O_RDWR);
  struct flock hold {};
  hold.l_type = F_RDLCK;
  hold.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(recorded_fd, F_OFD_SETLK, &hold), 0);
  PrepareOptions o;
  o.inputs = {dir.file("in.fa")};
  o.output = out;
  std::ostringstream progress;
  o.progress = &progress;
  prepare_dataset(o);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_FALSE(std::filesystem::exists(stale_dir));
  EXPECT_NE(progress.str().find("removed stale temporary file '" + stale + "'"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("removed stale temporary folder '" + stale_dir + "'"), std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find("process " + dead), std::string::npos) << progress.str();
  for (const auto& k : kept) EXPECT_EQ(test::read_all(k), "keep") << k;
  EXPECT_EQ(test::read_all(users_dir + "/notes"), "keep");
  EXPECT_EQ(test::read_all(held), hdf5_start + "being written");
  EXPECT_EQ(test::read_all(recorded), hdf5_start + "being written too");
  ::close(held_fd);
  ::close(recorded_fd);
  EXPECT_TRUE(std::filesystem::exists(out));
}

// A stop request (the CLI's SIGINT / SIGTERM flag) ends the run between
// records: the temporary file is removed, no output appears, and the error
// says that it was stopped.
TEST(Prepare, StopRequestRemovesTheTemporaryFile) {
  test::TempDir dir;
  PrepareOptions o;
  o.inputs = {test::kDbFasta};
  o.output = dir.file("out.h5");
  int polls = 0;
  o.stop_requested = [&polls] { return ++polls > 100; };
  try {
    prepare_dataset(o);
    FAIL() << "no throw";
  } catch (const PrepareStopped& e) {
    EXPECT_NE(std::string(e.what()).find("stopped"), std::string::npos) << e.what();
  }
  EXPECT_GT(polls, 100);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// TemporaryDataset (performer-eval --fasta) prepares into a scratch folder
// "pf-dataset-*" of the temporary directory. One left by a process that was
// killed (its marker no longer locked) is removed by the next one; a folder
// of that name without the marker (the user's), one whose marker a live
// process holds, a link to a marked folder, and a marked folder of another
// name are kept. Its own folder holds the locked marker while it lives and
// is gone after; a stopped preparation removes it too.
TEST(TemporaryDataset, FoldersOfKilledRunsAreRemovedAndOthersKept) {
  test::TempDir dir;
  test::write_text(dir.file("in.fa"), ">a\nMKVLA\n>b\nMSTNP\n");
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directories(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  auto marked = [&](const std::string& name) {
    const std::string f = tmp + "/" + name;
    std::filesystem::create_directories(f);
    test::write_text(f + "/" + ScratchFolder::kMarker, "");
    test::write_text(f + "/data.h5", "prepared");
    return f;
  };
  const std::string killed = marked("pf-dataset-k1ll3d"), live = marked("pf-dataset-l1ve00"),
                    other = marked("pf-other-d3adx0"), target = marked("elsewhere");
  const std::string users = tmp + "/pf-dataset-us3rs0";
  std::filesystem::create_directories(users);
  test::write_text(users + "/notes", "keep");
  std::filesystem::create_directory_symlink(target, tmp + "/pf-dataset-l1nk00");
  const int live_fd = ::open((live + "/" + ScratchFolder::kMarker).c_str(), O_RDONLY);
  ASSERT_EQ(::flock(live_fd, LOCK_EX), 0);
  std::string mine;
  {
    PrepareOptions o;
    o.inputs = {dir.file("in.fa")};
    TemporaryDataset data(o);
    mine = data.folder();
    EXPECT_EQ(std::filesystem::path(mine).parent_path(), std::filesystem::path(tmp));
    EXPECT_TRUE(std::filesystem::is_regular_file(data.path()));
    EXPECT_TRUE(file_in_use(mine + "/" + ScratchFolder::kMarker)) << "its marker must be locked while it lives";
    EXPECT_FALSE(ScratchFolder::is_left_over(mine));
  }
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(killed));
  for (const std::string& kept : {live, other, users, target})
    EXPECT_TRUE(std::filesystem::is_directory(kept)) << kept;
  EXPECT_TRUE(std::filesystem::is_symlink(tmp + "/pf-dataset-l1nk00"));
  EXPECT_EQ(test::read_all(users + "/notes"), "keep");
  EXPECT_EQ(test::read_all(target + "/data.h5"), "prepared");
  ::close(live_fd);
  {
    PrepareOptions o;
    o.inputs = {test::kDbFasta};
    int polls = 0;
    o.stop_requested = [&polls] { return ++polls > 100; };
    EXPECT_THROW(TemporaryDataset data(o), PrepareStopped);
  }
  for (const auto& e : std::filesystem::directory_iterator(tmp)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "pf-dataset-us3rs0" || name == "pf-other-d3adx0" || name == "elsewhere" ||
                name == "pf-dataset-l1nk00" || name == "pf-dataset-l1ve00")
        << "left in the temporary directory: " << name;
  }
  if (old_tmpdir)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

// --families: the clusters of the split are the table's families, not
// MMseqs2's (the members here are unrelated random proteins, which MMseqs2
// would leave one per cluster): 4 families of 3, each family whole in one
// split, /clusters' mode "families". A sequence without a family, a
// malformed line, a name in two families and a missing --cluster-identity
// are refused naming the file and the line.
TEST(Prepare, GivenFamiliesAreTheClusters) {
  test::TempDir dir;
  std::string fasta, table = "# name<TAB>family\n\n";
  KeyedRandom rng(77, 0, 0);
  uint64_t draw = 0;
  for (int f = 0; f < 4; ++f)
    for (int k = 0; k < 3; ++k) {
      const std::string name = "fam" + std::to_string(f) + "_m" + std::to_string(k);
      std::string residues;
      for (int i = 0; i < 80; ++i) residues += "ACDEFGHIKLMNPQRSTVWY"[static_cast<int>(rng.uniform(draw++) * 20)];
      fasta += ">" + name + " member\n" + residues + "\n";
      table += name + "\tfamily_" + std::to_string(f) + "\n";
    }
  test::write_text(dir.file("in.fa"), fasta);
  test::write_text(dir.file("families.tsv"), table);
  PrepareOptions o;
  o.inputs = {dir.file("in.fa")};
  o.output = dir.file("out.h5");
  o.val_fraction = o.test_fraction = 0.25;
  o.cluster.identity = 0.3;
  o.families = dir.file("families.tsv");
  const PrepareSummary summary = prepare_dataset(o);
  EXPECT_EQ(summary.clusters, 4);
  H5Id file = h5_open_file(o.output);
  const ClusterTable t = open_prepared_data(o.output).cluster_table();
  EXPECT_EQ(t.parameters.mode, kGivenFamiliesMode);
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{3, 3, 3, 3}));
  std::map<int64_t, std::set<std::string>> family_of_cluster;  // cluster -> families of its members
  for (int s = 0; s < 3; ++s) {
    H5Id group = h5_open_group(file, kSplitNames[s]);
    const std::vector<std::string> ids = h5_read_strings(group, "ids");
    ASSERT_EQ(ids.size(), t.members[s].size());
    for (size_t i = 0; i < ids.size(); ++i) family_of_cluster[t.members[s][i]].insert(ids[i].substr(0, 4));
  }
  ASSERT_EQ(family_of_cluster.size(), 4u);
  for (const auto& [cluster, families] : family_of_cluster) EXPECT_EQ(families.size(), 1u) << "cluster " << cluster;

  auto refused = [&](const std::string& tsv, const std::string& expected) {
    test::write_text(dir.file("bad.tsv"), tsv);
    PrepareOptions b = o;
    b.output = dir.file("bad.h5");
    b.families = dir.file("bad.tsv");
    try {
      prepare_dataset(b);
      ADD_FAILURE() << "accepted: " << tsv;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(b.output));
  };
  std::string missing = table.substr(0, table.rfind("fam3_m2"));
  refused(missing, dir.file("in.fa") + ":23: 'fam3_m2' has no family in --families '" + dir.file("bad.tsv") + "'");
  refused(table + "fam9 no tab\n", dir.file("bad.tsv") + ":15: expected 'name<TAB>family'");
  refused(table + "fam0_m1\tfamily_3\n", dir.file("bad.tsv") + ":15: 'fam0_m1' is in family 'family_3' here and in "
                                                               "'family_0' on line 4");
  PrepareOptions unclustered = o;
  unclustered.output = dir.file("unclustered.h5");
  unclustered.cluster.identity = 0;
  EXPECT_THROW(prepare_dataset(unclustered), ValueError);
}

// Whole families go to one split, so a family holding most sequences leaves
// /train empty whatever the order (its 10 small neighbours cannot fill the
// held-out targets): refused before anything is written, naming the split,
// the fractions, the table and the family with its representative and size.
// Fractions that leave /train empty on purpose (summing to 1) are accepted.
TEST(Prepare, AFamilyThatEmptiesTrainIsRefusedNamingIt) {
  test::TempDir dir;
  const std::vector<test::RefRecord> records = test::reference_fasta(test::kQueryFasta);
  ASSERT_GT(records.size(), 100u);
  const size_t big = records.size() - 10;  // the first records: one family; the last 10: one each
  std::string table;
  std::set<std::string> seen, big_seen;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string id = records[i].header.substr(0, records[i].header.find(' '));
    table += id + "\t" + (i < big ? std::string("big_family") : "small_" + std::to_string(i)) + "\n";
    if (seen.insert(records[i].residues).second && i < big) big_seen.insert(records[i].residues);
  }
  test::write_text(dir.file("big.tsv"), table);
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.output = dir.file("out.h5");
  o.val_fraction = o.test_fraction = 0.05;
  o.cluster.identity = 0.3;
  o.families = dir.file("big.tsv");
  const std::string first_id = records[0].header.substr(0, records[0].header.find(' '));
  try {
    prepare_dataset(o);
    ADD_FAILURE() << "a file without /train was written";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    for (const std::string& part :
         {"--families '" + o.families + "'", std::string("/train would be empty"),
          std::string("--val-fraction 0.05 and --test-fraction 0.05 leave it 0.9 of the ") +
              std::to_string(seen.size()) + " sequences",
          "family 'big_family' (representative '" + first_id + "', " + std::to_string(big_seen.size()) + " of the " +
              std::to_string(seen.size()) + " sequences) went whole to /",
          std::string("Split family 'big_family' into smaller families in '") + o.families + "'",
          std::string("fractions that sum to 1")})
      EXPECT_NE(what.find(part), std::string::npos) << "missing: " << part << "\nin: " << what;
  }
  EXPECT_FALSE(std::filesystem::exists(o.output));
  // Asked for: no /train (and no /valid).
  o.val_fraction = 0;
  o.test_fraction = 1;
  const PrepareSummary s = prepare_dataset(o);
  EXPECT_EQ(s.splits[0].sequences, 0);
  EXPECT_EQ(s.splits[1].sequences + s.splits[2].sequences, static_cast<int64_t>(seen.size()));
}

}  // namespace
}  // namespace pf
