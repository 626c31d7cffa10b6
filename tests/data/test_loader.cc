// The sharded loader: rank slices against samples built independently from the
// whole file, slices of sp = 1..4 concatenating to the one-rank sample (both
// modes, two shards), slice-only reads proven by byte counters, disjoint and
// complete data-parallel groups, deterministic shuffles, save/restore of the
// position, long samples, and the error paths (bad grid, short dataset, wrong
// schema, truncated file, corrupt chunk forwarded from the read-ahead thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "data/h5.h"
#include "data/loader.h"
#include "data/permutation.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

// The whole split, read the straightforward way: proteins and the stream.
struct Reference {
  std::vector<std::vector<uint8_t>> proteins;
  std::vector<uint8_t> stream;
  explicit Reference(const std::vector<std::string>& files, const char* split = "train") {
    for (const auto& path : files) {
      H5Id f = h5_open_file(path);
      H5Id g = h5_open_group(f, split);
      const auto tokens = h5_read_array<uint8_t>(g, "tokens");
      const auto offsets = h5_read_array<int64_t>(g, "offsets");
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        proteins.emplace_back(tokens.begin() + offsets[i], tokens.begin() + offsets[i + 1]);
        stream.insert(stream.end(), proteins.back().begin(), proteins.back().end());
        stream.push_back(Vocab::kEnd);
      }
    }
  }
  // Positions [0, L] of a sample (L tokens plus the lookahead).
  std::vector<uint8_t> sample(SampleMode mode, int64_t L, uint64_t seed, int64_t epoch, int64_t s) const {
    std::vector<uint8_t> out(static_cast<size_t>(L + 1), Vocab::kPad);
    if (mode == SampleMode::Concat) {
      for (int64_t x = 0; x <= L && s * L + x < static_cast<int64_t>(stream.size()); ++x)
        out[static_cast<size_t>(x)] = stream[static_cast<size_t>(s * L + x)];
    } else {
      std::vector<uint8_t> w = proteins[static_cast<size_t>(s)];
      w.push_back(Vocab::kEnd);
      const int64_t c = crop_start(seed, epoch, s, static_cast<int64_t>(w.size()), L);
      EXPECT_GE(c, 0);
      EXPECT_LE(c, std::max<int64_t>(0, static_cast<int64_t>(w.size()) - L));
      for (int64_t x = 0; x <= L && c + x < static_cast<int64_t>(w.size()); ++x)
        out[static_cast<size_t>(x)] = w[static_cast<size_t>(c + x)];
    }
    return out;
  }
};

// A second shard: the Swiss-Prot file alone, all in train.
const std::string& swiss_shard() {
  static const std::string* path = [] {
    auto* p = new std::string(test::prepared_real().dir.file("swiss.h5"));
    PrepareOptions o;
    o.inputs = {test::kSwissDat};
    o.output = *p;
    o.val_fraction = o.test_fraction = 0;
    prepare_dataset(o);
    return p;
  }();
  return *path;
}

LoaderOptions base_options(SampleMode mode, int64_t L) {
  LoaderOptions o;
  o.files = {test::prepared_real().path, swiss_shard()};
  o.mode = mode;
  o.sample_length = L;
  o.batch_size = 3;
  o.seed = 99;
  return o;
}

void check_slices_concatenate(SampleMode mode, int64_t L, int steps) {
  const LoaderOptions base = base_options(mode, L);
  const Reference ref(base.files);
  DataLoader one(base);
  std::vector<Batch> full;
  for (int i = 0; i < steps; ++i) full.push_back(one.next());
  for (const Batch& b : full)
    for (int64_t r = 0; r < b.batch_size; ++r) {
      const auto expect = ref.sample(mode, L, base.seed, b.position.epoch, b.samples[r].sample);
      ASSERT_TRUE(std::equal(expect.begin(), expect.end() - 1, b.tokens.begin() + r * L)) << "sample " << r;
      ASSERT_EQ(b.lookahead[r], expect.back());
      const SampleInfo& info = b.samples[r];
      ASSERT_TRUE(info.valid);
      if (mode == SampleMode::Single) {
        ASSERT_EQ(info.protein, info.sample);
        ASSERT_EQ(info.source_length, static_cast<int64_t>(ref.proteins[info.sample].size()));
      } else {
        ASSERT_EQ(info.source_start, info.sample * L);
      }
    }
  for (int64_t sp = 2; sp <= 4; ++sp) {
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int64_t k = 0; k < sp; ++k) {
      LoaderOptions o = base;
      o.sp_size = sp;
      o.sp_rank = k;
      o.prefetch = k % 2 ? 0 : 3;  // both paths
      ranks.push_back(std::make_unique<DataLoader>(o));
    }
    for (const Batch& b : full) {
      std::vector<uint8_t> joined(static_cast<size_t>(b.batch_size * L));
      uint8_t last_lookahead[8] = {0};
      for (int64_t k = 0; k < sp; ++k) {
        const Batch s = ranks[static_cast<size_t>(k)]->next();
        ASSERT_EQ(s.position, b.position);
        ASSERT_EQ(s.slice_length, L / sp);
        ASSERT_EQ(s.global_offset, k * L / sp);
        for (int64_t r = 0; r < b.batch_size; ++r) {
          ASSERT_EQ(s.samples[r].sample, b.samples[r].sample);
          std::copy(s.tokens.begin() + r * s.slice_length, s.tokens.begin() + (r + 1) * s.slice_length,
                    joined.begin() + r * L + s.global_offset);
          // Lookahead of a slice = first token of the next slice.
          if (k + 1 < sp) ASSERT_EQ(s.lookahead[r], b.tokens[r * L + (k + 1) * L / sp]);
          else last_lookahead[r] = s.lookahead[r];
        }
      }
      ASSERT_EQ(joined, b.tokens) << "sp " << sp << " sample " << b.position.sample;
      for (int64_t r = 0; r < b.batch_size; ++r) ASSERT_EQ(last_lookahead[r], b.lookahead[r]);
    }
  }
}

TEST(Loader, ConcatSlicesOfSp1To4JoinToTheSample) { check_slices_concatenate(SampleMode::Concat, 6144, 4); }

TEST(Loader, SingleSlicesOfSp1To4JoinToTheSample) { check_slices_concatenate(SampleMode::Single, 600, 12); }

TEST(Loader, CropsAreKeyedBySeedEpochAndSampleAndStayInRange) {
  const int64_t window = 5000, L = 600;
  std::set<int64_t> starts;
  for (int64_t epoch = 0; epoch < 50; ++epoch) {
    const int64_t c = crop_start(3, epoch, 17, window, L);
    ASSERT_GE(c, 0);
    ASSERT_LE(c, window - L);
    ASSERT_EQ(c, crop_start(3, epoch, 17, window, L));
    starts.insert(c);
  }
  EXPECT_GT(starts.size(), 40u);  // 50 draws from 4401 offsets: repeats are rare
  EXPECT_NE(crop_start(3, 0, 17, window, L), crop_start(4, 0, 17, window, L));
  EXPECT_NE(crop_start(3, 0, 17, window, L), crop_start(3, 0, 18, window, L));
  EXPECT_EQ(crop_start(3, 0, 17, L, L), 0);  // fits: no crop
  EXPECT_LE(crop_start(3, 0, 17, L + 1, L), 1);
}

TEST(Loader, RanksReadOnlyTheirSlice) {
  for (SampleMode mode : {SampleMode::Concat, SampleMode::Single}) {
    const int64_t L = 8192, sp = 4;
    LoaderOptions o = base_options(mode, L);
    o.sp_size = sp;
    o.sp_rank = 2;
    o.prefetch = 0;
    o.batch_size = 2;
    DataLoader loader(o);
    for (int step = 0; step < 3; ++step) {
      const ReadCounters before = loader.read_counters();
      const Batch b = loader.next();
      const ReadCounters after = loader.read_counters();
      int64_t residues = 0;  // residue tokens in the slices and lookaheads: exactly what must be read
      for (uint8_t t : b.tokens) residues += t >= Vocab::kFirstResidue;
      for (uint8_t t : b.lookahead) residues += t >= Vocab::kFirstResidue;
      EXPECT_EQ(after.token_bytes - before.token_bytes, residues) << sample_mode_name(mode);
      EXPECT_LE(after.token_bytes - before.token_bytes, o.batch_size * (L / sp + 1));
      const int64_t offset_bytes = after.offset_bytes - before.offset_bytes;
      if (mode == SampleMode::Single) {
        EXPECT_EQ(offset_bytes, o.batch_size * 16);  // offsets[p], offsets[p + 1]
      } else {
        // One binary search (log2(19,000 proteins) < 15 single reads, twice at a
        // shard boundary) and the proteins the slice overlaps, read in blocks of
        // 16, 32, ... entries (at most twice what is needed).
        int64_t bound = 0;
        for (int64_t r = 0; r < o.batch_size; ++r) {
          int64_t proteins = 1;
          for (int64_t x = 0; x < b.slice_length; ++x) proteins += b.tokens[r * b.slice_length + x] == Vocab::kEnd;
          bound += 8 * (2 * 15 + 2 * std::max<int64_t>(16, 2 * (proteins + 2)));
        }
        EXPECT_LE(offset_bytes, bound);
      }
    }
  }
}

TEST(Loader, DataParallelGroupsAreDisjointAndCoverTheEpoch) {
  for (SampleMode mode : {SampleMode::Single, SampleMode::Concat}) {
    const int64_t dp = 3;
    std::vector<int64_t> seen;
    int64_t samples = 0, padding = 0;
    for (int64_t d = 0; d < dp; ++d) {
      LoaderOptions o = base_options(mode, mode == SampleMode::Single ? 64 : 4096);
      o.files = {test::prepared_real().path};
      o.split = "valid";
      o.dp_size = dp;
      o.dp_rank = d;
      o.batch_size = 5;
      DataLoader loader(o);
      samples = loader.samples_per_epoch();
      EXPECT_EQ(loader.steps_per_epoch(), (samples + 14) / 15);
      for (int64_t t = 0; t < loader.steps_per_epoch(); ++t) {
        const Batch b = loader.next();
        for (const SampleInfo& s : b.samples) {
          if (s.valid) seen.push_back(s.sample);
          else ++padding;
        }
      }
      EXPECT_EQ(loader.position(), (LoaderPosition{1, 0}));
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(static_cast<int64_t>(seen.size()), samples);
    for (int64_t i = 0; i < samples; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
    EXPECT_EQ(padding, (samples + 14) / 15 * 15 - samples);
  }
}

TEST(Loader, KeyedPermutationIsABijectionAndShufflesAreDeterministic) {
  for (uint64_t n : {1u, 2u, 3u, 17u, 1000u, 1025u, 4096u}) {
    const KeyedPermutation perm(n, 12345);
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(perm(i));
    std::sort(v.begin(), v.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i) << "n " << n;
  }
  LoaderOptions o = base_options(SampleMode::Single, 256);
  DataLoader a(o), b(o);
  o.seed = 100;
  DataLoader c(o);
  std::vector<int64_t> e0, e1, other;
  for (int64_t i = 0; i < 200; ++i) {
    ASSERT_EQ(a.sample_at(0, i), b.sample_at(0, i));
    e0.push_back(a.sample_at(0, i));
    e1.push_back(a.sample_at(1, i));
    other.push_back(c.sample_at(0, i));
  }
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, other);
  std::vector<int64_t> identity(200);
  for (int64_t i = 0; i < 200; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(e0, identity);
  o.shuffle = false;
  DataLoader d(o);
  for (int64_t i = 0; i < 200; ++i) ASSERT_EQ(d.sample_at(3, i), i);
}

TEST(Loader, RestoredPositionSeesExactlyTheSameBatches) {
  LoaderOptions o = base_options(SampleMode::Concat, 8192);
  o.files = {test::prepared_real().path};
  o.split = "test";
  o.batch_size = 16;
  DataLoader a(o);
  ASSERT_GE(a.steps_per_epoch(), 2);
  ASSERT_LE(a.steps_per_epoch(), 6);
  for (int i = 0; i < 2; ++i) a.next();
  const LoaderPosition saved = a.position();
  std::vector<Batch> rest;
  for (int i = 0; i < 2 * a.steps_per_epoch(); ++i) rest.push_back(a.next());  // crosses epoch boundaries
  EXPECT_EQ(a.position().epoch, saved.epoch + 2);
  for (int64_t prefetch : {0, 1, 4}) {
    o.prefetch = prefetch;
    DataLoader b(o);
    b.next();  // fill the read-ahead queue with batches that must be discarded
    b.set_position(saved);
    EXPECT_EQ(b.position(), saved);
    for (const Batch& expect : rest) {
      const Batch got = b.next();
      ASSERT_EQ(got.position, expect.position);
      ASSERT_EQ(got.tokens, expect.tokens);
      ASSERT_EQ(got.lookahead, expect.lookahead);
      for (size_t r = 0; r < got.samples.size(); ++r) ASSERT_EQ(got.samples[r].sample, expect.samples[r].sample);
    }
  }
  // Resuming on twice the data-parallel groups with the same global batch:
  // the two groups' batches, stacked, are the single group's batches.
  o.prefetch = 2;
  o.dp_size = 2;
  o.batch_size = 8;
  LoaderOptions o1 = o;
  o1.dp_rank = 1;
  DataLoader d0(o), d1(o1);
  d0.set_position(saved);
  d1.set_position(saved);
  for (const Batch& expect : rest) {
    const Batch b0 = d0.next(), b1 = d1.next();
    ASSERT_EQ(b0.position, expect.position);
    std::vector<uint8_t> stacked(b0.tokens);
    stacked.insert(stacked.end(), b1.tokens.begin(), b1.tokens.end());
    ASSERT_EQ(stacked, expect.tokens);
  }
  EXPECT_THROW(a.set_position(LoaderPosition{0, a.samples_per_epoch()}), ValueError);
}

TEST(Loader, LongConcatSamplesOfOneMillionTokens) {
  for (int64_t L : {int64_t{65536}, int64_t{1} << 20}) {
    LoaderOptions o = base_options(SampleMode::Concat, L);
    o.files = {test::prepared_real().path};
    o.batch_size = 1;
    o.sp_size = 4;
    o.sp_rank = 3;
    o.prefetch = 1;
    DataLoader loader(o);
    const Reference ref(o.files);
    const Batch b = loader.next();
    const auto expect = ref.sample(SampleMode::Concat, L, o.seed, 0, b.samples[0].sample);
    ASSERT_TRUE(std::equal(b.tokens.begin(), b.tokens.end(), expect.begin() + 3 * L / 4));
    EXPECT_EQ(b.lookahead[0], expect.back());
    EXPECT_EQ(loader.samples_per_epoch(), static_cast<int64_t>(ref.stream.size()) / L);
    EXPECT_EQ(b.tokens_int32().size(), static_cast<size_t>(L / 4));
  }
}

template <typename Err>
void expect_loader_error(const LoaderOptions& o, const std::vector<std::string>& pieces) {
  try {
    DataLoader loader(o);
    FAIL() << "no throw";
  } catch (const Err& e) {
    for (const auto& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Loader, ErrorsForBadGridShortDataWrongSchemaAndDamagedFiles) {
  LoaderOptions o = base_options(SampleMode::Concat, 8192);
  o.sp_size = 3;
  expect_loader_error<ValueError>(o, {"8192", "sequence-parallel size 3"});
  o = base_options(SampleMode::Concat, int64_t{1} << 20);
  o.files = {swiss_shard()};
  expect_loader_error<DataError>(o, {"shorter than one sample", "1048576", "swiss.h5"});

  test::TempDir dir;
  {
    H5Id f = h5_create_file(dir.file("v9.h5"));
    h5_write_attr_string(f, "schema", "performer-protein-v9");
    h5_write_attr_int64(f, "schema_version", 9);
    h5_write_attr_string(f, "vocabulary", Vocab::description());
  }
  o = base_options(SampleMode::Concat, 1024);
  o.files = {dir.file("v9.h5")};
  expect_loader_error<DataError>(o, {"v9.h5", "performer-protein-v9", "performer-protein-v1"});

  const std::string real = test::prepared_real().path;
  const auto size = std::filesystem::file_size(real);
  std::ifstream in(real, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::write_text(dir.file("cut.h5"), bytes.substr(0, size / 2));
  o.files = {dir.file("cut.h5")};
  // The file and why: HDF5 cannot open it, as its superblock records an end
  // of file past the end of the truncated file.
  expect_loader_error<Hdf5Error>(o, {"cut.h5", "cannot open", "H5Fopen", "truncated file"});

  // Overwrite the first chunk of /train/tokens: opening works, reading fails
  // (Fletcher-32 / inflate) inside the read-ahead thread, and next() rethrows.
  haddr_t addr = 0;
  hsize_t chunk_bytes = 0;
  {
    H5Id f = h5_open_file(real);
    H5Id d = h5_open_dataset(f, "train/tokens");
    hsize_t offset[1];
    unsigned mask = 0;
    H5Id space(H5Dget_space(d));
    PF_H5_CHECK(H5Dget_chunk_info(d, space, 0, offset, &mask, &addr, &chunk_bytes));
  }
  for (hsize_t k = 0; k < chunk_bytes; ++k) bytes[addr + k] = static_cast<char>(k * 37 + 11);
  test::write_text(dir.file("bad_chunk.h5"), bytes);
  o = base_options(SampleMode::Concat, 1024);
  o.files = {dir.file("bad_chunk.h5")};
  o.shuffle = false;  // sample 0 lies in the damaged chunk
  DataLoader loader(o);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      loader.next();
      FAIL() << "no throw";
    } catch (const Hdf5Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("bad_chunk.h5"), std::string::npos) << w;
      // Why: the read of /train/tokens failed in the filter pipeline (the
      // Fletcher-32 checksum or inflate of the overwritten chunk). The reason
      // used to be lost ("no HDF5 error stack"): naming the dataset for the
      // message cleared HDF5's error stack before it was read.
      EXPECT_NE(w.find("/train/tokens"), std::string::npos) << w;
      EXPECT_NE(w.find("H5Dread"), std::string::npos) << w;
      EXPECT_NE(w.find("filter"), std::string::npos) << w;
    }
  }
}

// Rewrites /train/offsets of a copy of a prepared file with `edit` applied.
std::string with_edited_offsets(const test::TempDir& dir, const std::string& name,
                                void (*edit)(std::vector<int64_t>&)) {
  const std::string path = dir.file(name);
  std::filesystem::copy_file(swiss_shard(), path, std::filesystem::copy_options::overwrite_existing);
  H5Id f = h5_open_file(path, true);
  H5Id d = h5_open_dataset(f, "train/offsets");
  std::vector<int64_t> off(static_cast<size_t>(h5_dataset_length(d)));
  h5_read_range(d, 0, static_cast<int64_t>(off.size()), off.data());
  edit(off);
  PF_H5_CHECK(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, off.data()));
  return path;
}

// Interior offsets are checked when a file is opened, in both modes: the
// concat stream used to read them without looking and trained on wrong
// samples. The error names the file, the dataset, the first bad index and the
// values.
TEST(Loader, InteriorOffsetsAreValidatedWhenOpeningInBothModes) {
  test::TempDir dir;
  std::vector<int64_t> good;
  {
    H5Id f = h5_open_file(swiss_shard());
    good = h5_read_array<int64_t>(f, "train/offsets");
  }
  ASSERT_GT(good.size(), 12u);
  const std::string swapped = with_edited_offsets(dir, "swapped.h5", [](std::vector<int64_t>& o) {
    std::swap(o[5], o[6]);  // offsets[6] < offsets[5]
  });
  const std::string beyond = with_edited_offsets(dir, "beyond.h5", [](std::vector<int64_t>& o) {
    o[3] = o.back() + 1000;  // past the end of tokens
  });
  const std::string negative = with_edited_offsets(dir, "negative.h5", [](std::vector<int64_t>& o) { o[2] = -7; });
  const std::string first = with_edited_offsets(dir, "first.h5", [](std::vector<int64_t>& o) { o[0] = 1; });
  const int64_t residues = good.back();
  const std::string n = std::to_string(residues);
  for (SampleMode mode : {SampleMode::Concat, SampleMode::Single}) {
    SCOPED_TRACE(sample_mode_name(mode));
    LoaderOptions o = base_options(mode, 64);
    o.files = {test::prepared_real().path, swapped};  // the bad file second: every shard is checked
    expect_loader_error<DataError>(o, {"swapped.h5", "/train/offsets", "offsets[6] = " + std::to_string(good[5]),
                                       "offsets[5] = " + std::to_string(good[6]), "decreas"});
    o.files = {beyond};
    expect_loader_error<DataError>(
        o, {"beyond.h5", "/train/offsets", "offsets[3] = " + std::to_string(residues + 1000), "[0, " + n + "]"});
    o.files = {negative};
    expect_loader_error<DataError>(o, {"negative.h5", "/train/offsets", "offsets[2] = -7", "[0, " + n + "]"});
    o.files = {first};
    expect_loader_error<DataError>(o, {"first.h5", "/train/offsets", "offsets[0] = 1"});
  }
}

}  // namespace
}  // namespace pf
