// Preparation within a memory budget: the external sort against std::sort
// (several runs and merge levels), the duplicate finder against an in-memory
// set of first occurrences, and prepare of 300,000 synthetic sequences (10 %
// exact repeats) with a 4 MiB budget and three threads against the default
// budget, where everything stays in memory, and one thread (the caller
// compresses every chunk itself): the same datasets, byte for byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "data/duplicates.h"
#include "data/external_sort.h"
#include "data/h5.h"
#include "data/id_conflicts.h"
#include "data/prepare.h"
#include "data/schema.h"
#include "data/synthetic_proteins.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

namespace fs = std::filesystem;

// A folder callback that counts its calls and makes the folder once.
struct CountingFolder {
  std::string path;
  int calls = 0;
  std::function<std::string()> callback() {
    return [this] {
      ++calls;
      fs::create_directories(path);
      return path;
    };
  }
};

TEST(ExternalSort, SortsAcrossRunsAndMergeLevelsAndCleansUp) {
  test::TempDir dir;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> values(300000);
  for (uint64_t& v : values) v = rng() % 100000;  // many equal values
  for (int64_t budget : {int64_t{64} << 10, int64_t{256} << 10, int64_t{8} << 20}) {
    CountingFolder folder{dir.file("runs" + std::to_string(budget))};
    {
      ExternalSorter<uint64_t> sorter(folder.callback(), "test", budget);
      for (uint64_t v : values) sorter.add(v);
      sorter.finish();
      std::vector<uint64_t> out;
      uint64_t v = 0;
      while (sorter.next(v)) out.push_back(v);
      std::vector<uint64_t> expect = values;
      std::sort(expect.begin(), expect.end());
      EXPECT_EQ(out, expect) << "budget " << budget;
      EXPECT_EQ(sorter.records(), static_cast<int64_t>(values.size()));
      const int64_t runs = (static_cast<int64_t>(values.size()) * 8 + budget - 1) / budget;
      EXPECT_EQ(sorter.runs_written(), runs > 1 ? runs : 0) << "budget " << budget;
      EXPECT_EQ(folder.calls > 0, runs > 1);
    }
    // Every run file is gone with the sorter.
    if (fs::exists(folder.path)) {
      EXPECT_TRUE(fs::is_empty(folder.path));
    }
  }
  EXPECT_THROW(ExternalSorter<uint64_t>([] { return std::string("/nonexistent"); }, "x", 1024), ValueError);
}

TEST(ExternalSort, APollThatThrowsStopsAMergeAndLeavesNoRunFile) {
  test::TempDir dir;
  std::mt19937_64 rng(3);
  std::vector<uint64_t> values(300000);
  for (uint64_t& v : values) v = rng();
  // 37 runs of 64 KiB merged two at a time: several merge levels.
  CountingFolder folder{dir.file("runs")};
  int64_t polls = 0;
  {
    ExternalSorter<uint64_t> sorter(folder.callback(), "test", 64 << 10);
    sorter.set_poll([&polls] {
      if (++polls == 3) throw std::runtime_error("stop");
    });
    for (uint64_t v : values) sorter.add(v);
    EXPECT_THROW(sorter.finish(), std::runtime_error);  // within the first merge level (300,000 records)
  }
  EXPECT_EQ(polls, 3);
  ASSERT_TRUE(fs::exists(folder.path));
  EXPECT_TRUE(fs::is_empty(folder.path));
  // A poll that never throws sees every record passed along, and the order
  // is unchanged; in memory too.
  for (int64_t budget : {int64_t{64} << 10, int64_t{8} << 20}) {
    ExternalSorter<uint64_t> sorter(folder.callback(), "test", budget);
    polls = 0;
    sorter.set_poll([&polls] { ++polls; });
    for (uint64_t v : values) sorter.add(v);
    sorter.finish();
    std::vector<uint64_t> out;
    uint64_t v = 0;
    while (sorter.next(v)) out.push_back(v);
    EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
    EXPECT_EQ(out.size(), values.size());
    if (budget > (64 << 10))
      EXPECT_EQ(polls, 300000 / ExternalSorter<uint64_t>::kPollEvery);  // next() alone
    else
      EXPECT_GT(polls, 300000 / ExternalSorter<uint64_t>::kPollEvery * 5);  // and every merge level
  }
}

TEST(ExternalSort, AFullOrMissingFolderIsAnIoErrorNamingTheFile) {
  ExternalSorter<uint64_t> sorter([] { return std::string("/nonexistent-folder"); }, "keys", 64 << 10);
  try {
    for (uint64_t v = 0; v < 20000; ++v) sorter.add(v);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/keys-0.run"), std::string::npos) << e.what();
  }
}

TEST(Duplicates, DropListIsEveryRepeatOfAnEarlierKey) {
  test::TempDir dir;
  std::mt19937_64 rng(11);
  std::vector<SequenceKey> keys(200000);
  for (SequenceKey& k : keys) {
    const uint64_t x = rng() % 60000;  // about 70 % repeats
    k = {x * 0x9E3779B97F4A7C15ull, x ^ 0xABCDull};
  }
  // Same first word, other second word: not a duplicate.
  keys[5] = {keys[4].a, keys[4].b + 1};
  struct Hash {
    size_t operator()(const SequenceKey& k) const { return static_cast<size_t>(k.a ^ (k.b << 1)); }
  };
  std::unordered_set<SequenceKey, Hash> seen;
  std::vector<bool> expect_dropped;
  for (const SequenceKey& k : keys) expect_dropped.push_back(!seen.insert(k).second);
  for (int64_t budget : {int64_t{1} << 20, int64_t{256} << 20}) {  // runs and a drop file on disk / all in memory
    CountingFolder folder{dir.file("dup" + std::to_string(budget))};
    DuplicateFinder finder(folder.callback(), budget);
    for (const SequenceKey& k : keys) finder.add(k);
    const DropList drops = finder.finish();
    EXPECT_EQ(finder.records(), static_cast<int64_t>(keys.size()));
    EXPECT_EQ(finder.runs_written() > 0, budget == (int64_t{1} << 20));
    int64_t count = 0;
    DropList::Cursor cursor(drops);
    for (size_t r = 0; r < keys.size(); ++r) {
      ASSERT_EQ(cursor.dropped(static_cast<int64_t>(r)), expect_dropped[r]) << "record " << r;
      count += expect_dropped[r];
    }
    EXPECT_EQ(drops.count(), count);
    EXPECT_FALSE(expect_dropped[5]);
  }
}

TEST(IdConflicts, EveryIdentifierHeldTwiceAndTheEarliestReuseAcrossSpills) {
  test::TempDir dir;
  std::mt19937_64 rng(13);
  const int64_t n = 100000;
  std::vector<std::string> ids(static_cast<size_t>(n));
  for (std::string& id : ids) id = "id" + std::to_string(rng() % 400000);  // about 12 % of names held twice or more
  // Brute force: per name its records in order; the earliest reuse is the
  // smallest second record of any name.
  std::map<std::string, std::vector<int64_t>> records;
  for (int64_t i = 0; i < n; ++i) records[ids[static_cast<size_t>(i)]].push_back(i);
  int64_t names = 0, shared = 0, first = -1, second = -1;
  for (const auto& [id, r] : records) {
    if (r.size() < 2) continue;
    ++names;
    shared += static_cast<int64_t>(r.size());
    if (second < 0 || r[1] < second) std::tie(first, second) = std::make_pair(r[0], r[1]);
  }
  ASSERT_GT(names, 1000);
  for (int64_t budget : {int64_t{256} << 10, int64_t{64} << 20}) {  // runs on disk / all in memory
    CountingFolder folder{dir.file("ids" + std::to_string(budget))};
    IdConflictFinder finder(folder.callback(), budget);
    for (int64_t i = 0; i < n; ++i) finder.add(ids[static_cast<size_t>(i)], i);
    const IdConflicts c = finder.finish();
    EXPECT_EQ(finder.runs_written() > 0, budget == (int64_t{256} << 10));
    EXPECT_EQ(c.names, names) << "budget " << budget;
    EXPECT_EQ(c.sequences, shared) << "budget " << budget;
    EXPECT_EQ(c.first_index, first);
    EXPECT_EQ(c.second_index, second);
  }
  // One name per record: nothing to report.
  CountingFolder folder{dir.file("unique")};
  IdConflictFinder finder(folder.callback(), int64_t{1} << 20);
  for (int64_t i = 0; i < 1000; ++i) finder.add("u" + std::to_string(i), i);
  const IdConflicts c = finder.finish();
  EXPECT_EQ(c.names, 0);
  EXPECT_EQ(c.sequences, 0);
  EXPECT_EQ(c.second_index, -1);
}

// Every dataset of every split, and the root attributes that describe the
// content, read back raw.
struct FileContent {
  std::map<std::string, std::vector<uint8_t>> tokens;
  std::map<std::string, std::vector<int64_t>> offsets;
  std::map<std::string, std::vector<std::string>> ids, headers;
  std::string digest;
  int64_t sequences_read = 0, duplicates = 0;
};

FileContent read_content(const std::string& path) {
  FileContent c;
  H5Id f = h5_open_file(path);
  for (const char* split : kSplitNames) {
    H5Id g = h5_open_group(f, split);
    c.tokens[split] = h5_read_array<uint8_t>(g, "tokens");
    c.offsets[split] = h5_read_array<int64_t>(g, "offsets");
    c.ids[split] = h5_read_strings(g, "ids");
    c.headers[split] = h5_read_strings(g, "headers");
  }
  c.digest = h5_read_attr_string(f, kContentDigestAttr);
  c.sequences_read = h5_read_attr_int64(f, "sequences_read");
  c.duplicates = h5_read_attr_int64(f, "duplicates_dropped");
  return c;
}

TEST(Prepare, FourMiBBudgetAndThreeThreadsGiveTheSameFileAsOneThreadInMemory) {
  test::TempDir dir;
  // Short proteins (5 .. 60 residues) with real-looking residue weights keep
  // 300,000 records small enough for a unit test.
  ProteinStatistics stats;
  for (int64_t n = 5; n <= 60; ++n) stats.lengths.push_back(n);
  stats.residue_weights.assign(Vocab::kSize, 0.0);
  for (int t = Vocab::kFirstResidue; t < Vocab::kFirstResidue + 20; ++t)
    stats.residue_weights[static_cast<size_t>(t)] = 1.0 + (t % 7);
  SyntheticOptions so;
  so.count = 300000;
  so.duplicate_fraction = 0.1;
  so.seed = 5;
  const std::string fasta = dir.file("synthetic.fasta.gz");
  write_synthetic_fasta(stats, so, fasta);

  PrepareOptions o;
  o.inputs = {fasta};
  o.val_fraction = o.test_fraction = 0.05;
  o.output = dir.file("memory.h5");
  o.threads = 1;
  const PrepareSummary memory = prepare_dataset(o);
  o.output = dir.file("budget.h5");
  o.memory_budget = int64_t{4} << 20;
  o.threads = 3;
  const PrepareSummary budget = prepare_dataset(o);
  EXPECT_EQ(memory.sort_runs, 0);
  EXPECT_GE(budget.sort_runs, 3);  // 300,000 keys of 24 bytes in 2 MiB buffers
  EXPECT_EQ(memory.sequences_read, 300000);
  EXPECT_GT(memory.duplicates_dropped, 20000);  // 10 % repeats, some of them of each other
  EXPECT_EQ(budget.duplicates_dropped, memory.duplicates_dropped);
  EXPECT_FALSE(fs::exists(dir.file("budget.h5.sort-" + std::to_string(::getpid()))));

  // The kept records: the first of each distinct residue string, in order.
  const std::vector<test::RefRecord> ref = test::reference_fasta(fasta);
  std::unordered_set<std::string> seen;
  int64_t kept = 0;
  for (const test::RefRecord& r : ref) kept += seen.insert(r.residues).second;
  EXPECT_EQ(300000 - memory.duplicates_dropped, kept);

  const FileContent a = read_content(dir.file("memory.h5")), b = read_content(dir.file("budget.h5"));
  for (const char* split : kSplitNames) {
    EXPECT_EQ(a.tokens.at(split), b.tokens.at(split)) << split;
    EXPECT_EQ(a.offsets.at(split), b.offsets.at(split)) << split;
    EXPECT_EQ(a.ids.at(split), b.ids.at(split)) << split;
    EXPECT_EQ(a.headers.at(split), b.headers.at(split)) << split;
  }
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.duplicates, b.duplicates);
  EXPECT_EQ(a.offsets.at("train").size() - 1 + a.offsets.at("valid").size() - 1 + a.offsets.at("test").size() - 1,
            static_cast<size_t>(kept));

  // A stop asked for once a pass is done lands in the sort that follows it
  // (polled every 65,536 records), and nothing is left behind.
  for (const char* pass : {"scanning ", "writing "}) {
    std::ostringstream progress;
    o.progress = &progress;
    o.output = dir.file("stopped.h5");
    o.stop_requested = [&progress, pass, &fasta] {
      const std::string text = progress.str();
      return text.find(std::string(pass) + fasta + ": 300000 sequences") != std::string::npos;
    };
    try {
      prepare_dataset(o);
      ADD_FAILURE() << "no stop after " << pass;
    } catch (const PrepareStopped& e) {
      const std::string what = std::string("stopped on request while sorting ") +
                               (pass[0] == 's' ? "the sequence keys" : "the identifier keys");
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    for (const auto& entry : fs::directory_iterator(dir.path()))
      EXPECT_EQ(entry.path().string().find("stopped.h5"), std::string::npos) << entry.path();
  }
  o.progress = nullptr;
  o.stop_requested = nullptr;
  o.memory_budget = 1000;
  EXPECT_THROW(prepare_dataset(o), ValueError);
}

TEST(Prepare, LengthHistogramGivesTheSortedVectorsPercentiles) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> v;
  for (int i = 0; i < 5001; ++i) v.push_back(1 + static_cast<int64_t>(rng() % 9000));
  LengthHistogram h;
  for (int64_t n : v) h.add(n);
  std::sort(v.begin(), v.end());
  const LengthStats s = h.stats();
  EXPECT_EQ(s.count, 5001);
  EXPECT_EQ(s.min, v.front());
  EXPECT_EQ(s.max, v.back());
  EXPECT_EQ(s.p50, v[2500]);  // nearest rank ceil(0.5 * 5001) = 2501
  EXPECT_EQ(s.p90, v[4500]);  // ceil(4500.9) = 4501
  EXPECT_EQ(s.p99, v[4950]);  // ceil(4950.99) = 4951
  int64_t residues = 0, longer = 0;
  for (int64_t n : v) residues += n, longer += n > 8192;
  EXPECT_EQ(s.residues, residues);
  EXPECT_EQ(s.longer_than_8192, longer);
}

}  // namespace
}  // namespace pf
