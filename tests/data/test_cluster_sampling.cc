// Cluster-weighted sampling (data/cluster_sampling.h) on the real QUERY
// proteins with synthetic clusters (tests/support/synthetic_clusters.h):
// draws uniform within a cluster (a chi-square bound that biased samplers
// fail), keyed by (seed, epoch, cluster) alone; every cluster visited once per
// epoch in single, concat and packed modes (family mode: the first context of
// each family, tests/data/test_family_loader.cc), the samples built independently
// from the drawn proteins read straight from the file; slices of sp = 1..4
// joining to the sample and a restored position giving the same batches
// across epochs of different lengths (in all four modes); clear errors for unclustered and damaged files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "data/cluster_sampling.h"
#include "data/h5.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/vocab.h"
#include "runtime/random.h"
#include "tests/data/clustered_query.h"
#include "tests/data/data_test_util.h"
#include "tests/data/h5_test_util.h"
#include "tests/support/error_message.h"
#include "tests/support/synthetic_clusters.h"

namespace pf {
namespace {

using test::clustered;
using test::cluster_options;
using test::ClusteredQuery;
using test::read_epoch;
using test::window_at;

// Pearson's statistic of `counts` against a uniform expectation.
double chi_square(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const double expect = static_cast<double>(total) / static_cast<double>(counts.size());
  double x = 0;
  for (int64_t c : counts) x += (c - expect) * (c - expect) / expect;
  return x;
}

// The chi-square quantile of `df` degrees of freedom at upper tail 1e-6
// (Wilson-Hilferty; z = 4.753).
double chi_square_bound(int64_t df) {
  const double k = static_cast<double>(df), a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + 4.753 * std::sqrt(a), 3.0);
}

using Sampler = std::function<int64_t(int64_t epoch, int64_t cluster, int64_t size)>;

// Member counts of `clusters` clusters of one size over `epochs` epochs.
std::vector<int64_t> member_counts(const Sampler& draw, int64_t size, int64_t clusters, int64_t epochs) {
  std::vector<int64_t> counts(static_cast<size_t>(size), 0);
  for (int64_t e = 0; e < epochs; ++e)
    for (int64_t c = 0; c < clusters; ++c) {
      const int64_t k = draw(e, c, size);
      if (k < 0 || k >= size) return {};
      ++counts[static_cast<size_t>(k)];
    }
  return counts;
}

TEST(ClusterSampling, MembersAreUniformWithinAClusterAndBiasedSamplersFailTheBound) {
  const Sampler ours = [](int64_t e, int64_t c, int64_t n) { return draw_member(11, e, c, n); };
  // Wrong samplers the bound must catch: a modulo of 8 random bits (its low
  // residues more likely), one member more often than the rest, and a draw
  // keyed by the cluster alone (the same member every epoch).
  const Sampler modulo_of_a_byte = [](int64_t e, int64_t c, int64_t n) {
    const KeyedRandom r(11, static_cast<uint64_t>(e), static_cast<uint64_t>(c));
    return static_cast<int64_t>((r.draw(0).v[0] & 0xFF) % static_cast<uint64_t>(n));
  };
  const Sampler favours_the_first = [&](int64_t e, int64_t c, int64_t n) {
    const int64_t k = ours(e, c, n);
    return (k == n - 1 && (e + c) % 2 == 0) ? 0 : k;  // half the last member's draws go to the first
  };
  const Sampler ignores_the_epoch = [&](int64_t, int64_t c, int64_t n) { return ours(0, c, n); };
  for (int64_t size : {2, 3, 7, 50, 1000}) {
    const int64_t clusters = 40, epochs = size * 2000 / clusters + 20;  // about 2,000 draws per member
    const std::vector<int64_t> counts = member_counts(ours, size, clusters, epochs);
    ASSERT_EQ(counts.size(), static_cast<size_t>(size));
    EXPECT_LT(chi_square(counts), chi_square_bound(size - 1)) << "size " << size;
    if (size >= 50) {
      const std::vector<int64_t> biased = member_counts(modulo_of_a_byte, size, clusters, epochs);
      EXPECT_GT(chi_square(biased), chi_square_bound(size - 1)) << "modulo bias, size " << size;
    }
    EXPECT_GT(chi_square(member_counts(favours_the_first, size, clusters, epochs)), chi_square_bound(size - 1))
        << "size " << size;
    // Per cluster over the epochs: the draws must vary with the epoch.
    std::vector<int64_t> one(static_cast<size_t>(size), 0), stuck(static_cast<size_t>(size), 0);
    for (int64_t e = 0; e < size * 2000; ++e) {
      ++one[static_cast<size_t>(ours(e, 3, size))];
      ++stuck[static_cast<size_t>(ignores_the_epoch(e, 3, size))];
    }
    EXPECT_LT(chi_square(one), chi_square_bound(size - 1)) << "cluster 3 over epochs, size " << size;
    EXPECT_GT(chi_square(stuck), chi_square_bound(size - 1)) << "size " << size;
  }
  EXPECT_EQ(draw_member(11, 5, 9, 1), 0);
  EXPECT_EQ(draw_member(11, 5, 9, 77), draw_member(11, 5, 9, 77));
  EXPECT_THROW(draw_member(11, 5, 9, 0), ValueError);
}

TEST(ClusterSampling, SplitClustersGroupMembersInAscendingOrder) {
  const SplitClusters c(std::vector<int64_t>{5, 2, 5, 9, 2, 2});
  ASSERT_EQ(c.count(), 3);  // ids 2, 5, 9; the unused ids drop out
  EXPECT_EQ(c.proteins(), 6);
  const std::vector<std::vector<int64_t>> expect = {{1, 4, 5}, {0, 2}, {3}};
  for (int64_t k = 0; k < 3; ++k) {
    ASSERT_EQ(c.size(k), static_cast<int64_t>(expect[static_cast<size_t>(k)].size()));
    for (int64_t m = 0; m < c.size(k); ++m)
      EXPECT_EQ(c.member(k, m), expect[static_cast<size_t>(k)][static_cast<size_t>(m)]);
  }
  const std::vector<int64_t> drawn = c.drawn_proteins(4, 2);
  EXPECT_EQ(drawn[0], expect[0][static_cast<size_t>(draw_member(4, 2, 0, 3))]);
  EXPECT_EQ(drawn[2], 3);
  EXPECT_THROW(SplitClusters(std::vector<int64_t>{0, -1}), ValueError);
  EXPECT_EQ(parse_sampling("cluster"), Sampling::Cluster);
  EXPECT_STREQ(sampling_name(parse_sampling("sequence")), "sequence");
  EXPECT_THROW(parse_sampling("clusters"), ValueError);
}

TEST(ClusterLoader, SingleModeVisitsEveryClusterOncePerEpochWithItsDrawnMember) {
  const ClusteredQuery& q = clustered();
  const int64_t L = 512;  // crops some proteins
  DataLoader loader(cluster_options(SampleMode::Single, L, 7));
  ASSERT_EQ(loader.samples_per_epoch(), q.clusters());
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> drawn = loader.drawn_proteins(epoch);
    std::vector<int> visits(static_cast<size_t>(q.clusters()), 0);
    for (const Batch& b : read_epoch(loader))
      for (int64_t r = 0; r < b.batch_size; ++r) {
        const SampleInfo& info = b.samples[static_cast<size_t>(r)];
        if (!info.valid) continue;
        const int64_t c = q.train_clusters[static_cast<size_t>(info.protein)];
        ++visits[static_cast<size_t>(c)];
        ASSERT_EQ(info.sample, c);  // cluster ids of the synthetic file are dense
        ASSERT_EQ(info.protein, drawn[static_cast<size_t>(c)]);
        const int64_t window = static_cast<int64_t>(q.windows[static_cast<size_t>(info.protein)].size());
        ASSERT_EQ(info.source_start, crop_start(23, epoch, info.protein, window, L));
        for (int64_t x = 0; x < L; ++x)
          ASSERT_EQ(b.tokens[static_cast<size_t>(r * L + x)], window_at(info.protein, info.source_start + x));
        ASSERT_EQ(b.lookahead[static_cast<size_t>(r)], window_at(info.protein, info.source_start + L));
      }
    for (int v : visits) ASSERT_EQ(v, 1);
  }
}

TEST(ClusterLoader, ConcatStreamIsTheDrawnMembersInClusterOrder) {
  const ClusteredQuery& q = clustered();
  const int64_t L = 1000;
  LoaderOptions o = cluster_options(SampleMode::Concat, L, 3);
  o.shuffle = false;  // sample i at position i
  DataLoader loader(o);
  std::set<int64_t> lengths;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<uint8_t> stream;
    for (int64_t p : loader.drawn_proteins(epoch))
      stream.insert(stream.end(), q.windows[static_cast<size_t>(p)].begin(), q.windows[static_cast<size_t>(p)].end());
    const int64_t samples = static_cast<int64_t>(stream.size()) / L;
    ASSERT_EQ(loader.samples_in_epoch(epoch), samples);
    lengths.insert(samples);
    stream.push_back(Vocab::kPad);  // past the end
    int64_t seen = 0;
    for (const Batch& b : read_epoch(loader))
      for (int64_t r = 0; r < b.batch_size; ++r) {
        const SampleInfo& info = b.samples[static_cast<size_t>(r)];
        if (!info.valid) continue;
        ASSERT_EQ(info.sample, seen++);
        for (int64_t x = 0; x < L; ++x)
          ASSERT_EQ(b.tokens[static_cast<size_t>(r * L + x)], stream[static_cast<size_t>(info.sample * L + x)]);
        ASSERT_EQ(b.lookahead[static_cast<size_t>(r)], stream[static_cast<size_t>((info.sample + 1) * L)]);
      }
    ASSERT_EQ(seen, samples);
  }
  EXPECT_GT(lengths.size(), 1u) << "epochs draw members of different lengths, so their sample counts differ";
}

TEST(ClusterLoader, PackedSamplesHoldEachDrawnMemberOnce) {
  const ClusteredQuery& q = clustered();
  const int64_t L = 768;
  DataLoader loader(cluster_options(SampleMode::Packed, L, 4));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> drawn = loader.drawn_proteins(epoch), placed;
    for (const Batch& b : read_epoch(loader))
      for (int64_t r = 0; r < b.batch_size; ++r) {
        if (!b.samples[static_cast<size_t>(r)].valid) continue;
        const std::vector<SliceSegment>& segs = b.segments[static_cast<size_t>(r)];
        for (size_t k = 0; k < segs.size(); ++k) {
          if (segs[k].protein < 0) continue;
          placed.push_back(segs[k].protein);
          const int64_t t = static_cast<int64_t>(q.windows[static_cast<size_t>(segs[k].protein)].size());
          const int64_t c = t > L ? crop_start(23, epoch, segs[k].protein, t, L) : 0;
          const int64_t end = k + 1 < segs.size() ? segs[k + 1].begin : L;
          ASSERT_EQ(segs[k].position, 0);
          for (int64_t x = segs[k].begin; x < end; ++x)
            ASSERT_EQ(b.tokens[static_cast<size_t>(r * L + x)], window_at(segs[k].protein, c + x - segs[k].begin));
        }
      }
    std::sort(drawn.begin(), drawn.end());
    std::sort(placed.begin(), placed.end());
    ASSERT_EQ(placed, drawn) << "epoch " << epoch;
  }
}

TEST(ClusterLoader, DrawsAreKeyedBySeedAndEpochAloneSoEveryRankAgrees) {
  const ClusteredQuery& q = clustered();
  LoaderOptions a = cluster_options(SampleMode::Single, 512, 2);
  LoaderOptions b = cluster_options(SampleMode::Packed, 768, 5);
  b.dp_size = 3;
  b.dp_rank = 2;
  LoaderOptions c = cluster_options(SampleMode::Concat, 600, 1);
  c.sp_size = 4;
  c.sp_rank = 1;
  LoaderOptions other_seed = a;
  other_seed.seed = 24;
  DataLoader la(a), lb(b), lc(c), ls(other_seed);
  int64_t multi = 0;
  for (int64_t k = 0; k < q.clusters(); ++k) multi += la.clusters()->size(k) > 1;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> d = la.drawn_proteins(epoch);
    EXPECT_EQ(d, lb.drawn_proteins(epoch));
    EXPECT_EQ(d, lc.drawn_proteins(epoch));
    const std::vector<int64_t> next = la.drawn_proteins(epoch + 1), seeded = ls.drawn_proteins(epoch);
    int64_t moved = 0, reseeded = 0;
    for (size_t k = 0; k < d.size(); ++k) {
      moved += d[k] != next[k];
      reseeded += d[k] != seeded[k];
    }
    EXPECT_GT(moved, multi / 3) << "epoch " << epoch;
    EXPECT_GT(reseeded, multi / 3) << "epoch " << epoch;
  }
}

TEST(ClusterLoader, SlicesOfSp1To4JoinToTheSample) {
  for (SampleMode mode : {SampleMode::Single, SampleMode::Concat, SampleMode::Packed, SampleMode::Family}) {
    const int64_t L = 840, B = 3;  // divisible by 1 .. 4
    DataLoader whole(cluster_options(mode, L, B));
    std::vector<Batch> expect;
    for (int i = 0; i < 4; ++i) expect.push_back(whole.next());
    for (int64_t sp = 2; sp <= 4; ++sp) {
      std::vector<std::vector<Batch>> ranks(static_cast<size_t>(sp));
      for (int64_t r = 0; r < sp; ++r) {
        LoaderOptions o = cluster_options(mode, L, B);
        o.sp_size = sp;
        o.sp_rank = r;
        DataLoader loader(o);
        for (int i = 0; i < 4; ++i) ranks[static_cast<size_t>(r)].push_back(loader.next());
      }
      const int64_t n = L / sp;
      for (int i = 0; i < 4; ++i)
        for (int64_t row = 0; row < B; ++row) {
          for (int64_t r = 0; r < sp; ++r) {
            const Batch& b = ranks[static_cast<size_t>(r)][static_cast<size_t>(i)];
            ASSERT_EQ(b.samples[static_cast<size_t>(row)].sample,
                      expect[static_cast<size_t>(i)].samples[static_cast<size_t>(row)].sample);
            for (int64_t x = 0; x < n; ++x)
              ASSERT_EQ(b.tokens[static_cast<size_t>(row * n + x)],
                        expect[static_cast<size_t>(i)].tokens[static_cast<size_t>(row * L + r * n + x)])
                  << sample_mode_name(mode) << " sp " << sp;
          }
          ASSERT_EQ(ranks[static_cast<size_t>(sp - 1)][static_cast<size_t>(i)].lookahead[static_cast<size_t>(row)],
                    expect[static_cast<size_t>(i)].lookahead[static_cast<size_t>(row)]);
        }
    }
  }
}

void expect_data_error(const std::function<void()>& fn, const std::vector<std::string>& pieces) {
  test::expect_error_naming<DataError>(fn, pieces);
}

void expect_same_batch(const Batch& a, const Batch& b) {
  ASSERT_EQ(a.position, b.position);
  ASSERT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.lookahead, b.lookahead);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t r = 0; r < a.samples.size(); ++r) {
    ASSERT_EQ(a.samples[r].sample, b.samples[r].sample);
    ASSERT_EQ(a.samples[r].protein, b.samples[r].protein);
    ASSERT_EQ(a.samples[r].source_start, b.samples[r].source_start);
  }
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (size_t r = 0; r < a.segments.size(); ++r) {
    ASSERT_EQ(a.segments[r].size(), b.segments[r].size());
    for (size_t k = 0; k < a.segments[r].size(); ++k) {
      ASSERT_EQ(a.segments[r][k].begin, b.segments[r][k].begin);
      ASSERT_EQ(a.segments[r][k].protein, b.segments[r][k].protein);
      ASSERT_EQ(a.segments[r][k].relatives, b.segments[r][k].relatives);
      ASSERT_EQ(a.segments[r][k].joins, b.segments[r][k].joins);
    }
  }
}

TEST(ClusterLoader, RestoredPositionSeesTheSameBatchesAcrossEpochs) {
  for (SampleMode mode : {SampleMode::Single, SampleMode::Concat, SampleMode::Packed, SampleMode::Family}) {
    LoaderOptions o = cluster_options(mode, mode == SampleMode::Single ? 256 : 2048, 4);
    o.dp_size = 2;
    o.dp_rank = 1;
    DataLoader a(o);
    const int64_t steps = 3 * a.steps_per_epoch() + 2;  // into the fourth epoch
    std::vector<Batch> all;
    for (int64_t t = 0; t < steps; ++t) all.push_back(a.next());
    ASSERT_EQ(all.back().position.epoch, 3) << sample_mode_name(mode);
    for (int64_t from : {int64_t{1}, a.steps_per_epoch(), steps - 3}) {
      for (int64_t prefetch : {0, 2}) {
        LoaderOptions ob = o;
        ob.prefetch = prefetch;
        DataLoader b(ob);
        b.set_position(all[static_cast<size_t>(from)].position);
        for (int64_t t = from; t < steps; ++t) expect_same_batch(b.next(), all[static_cast<size_t>(t)]);
      }
    }
  }
}

TEST(ClusterLoader, UnclusteredAndDamagedFilesAreClearErrors) {
  test::TempDir dir;
  PrepareOptions o;
  o.inputs = {test::kQueryFasta};
  o.output = dir.file("plain.h5");
  prepare_dataset(o);
  LoaderOptions lo = cluster_options(SampleMode::Single, 256, 2);
  lo.files = {o.output};
  expect_data_error([&] { DataLoader loader(lo); },
                    {"data.sampling = \"cluster\"", "'" + o.output + "'", "split by sequence hash"});
  // A cluster column of the wrong length.
  test::add_synthetic_clusters(o.output);
  {
    H5Id f = h5_open_file(o.output, true);
    H5Id g = h5_open_group(f, "train");
    H5Ldelete(g, "clusters", H5P_DEFAULT);
    h5_write_vector(g, "clusters", std::vector<int64_t>{0, 1, 2});
  }
  expect_data_error([&] { DataLoader loader(lo); }, {"'" + o.output + "' dataset /train/clusters", "holds 3 entries"});
  // A valid sequence moved into train's cluster 0 (the sizes kept consistent):
  // the held-out split shares a cluster with training, which `info` refuses
  // and so does the training loader, naming the cluster and both splits.
  PrepareOptions o2 = o;
  o2.output = dir.file("straddle.h5");
  o2.val_fraction = 0.1;
  prepare_dataset(o2);
  const std::vector<std::vector<int64_t>> columns = test::add_synthetic_clusters(o2.output);
  {
    H5Id f = h5_open_file(o2.output, true);
    H5Id valid = h5_open_group(f, "valid"), table = h5_open_group(f, "clusters");
    std::vector<int64_t> column = columns.at(1), sizes = h5_read_array<int64_t>(table, "sizes");
    --sizes[static_cast<size_t>(column.at(0))];
    ++sizes[0];
    column[0] = 0;
    H5Ldelete(valid, "clusters", H5P_DEFAULT);
    h5_write_vector(valid, "clusters", column);
    H5Ldelete(table, "sizes", H5P_DEFAULT);
    h5_write_vector(table, "sizes", sizes);
  }
  LoaderOptions straddle = lo;
  straddle.files = {o2.output};
  expect_data_error([&] { read_dataset_info(o2.output); }, {"'" + o2.output + "': cluster 0", "/train and /valid"});
  expect_data_error([&] { DataLoader loader(straddle); }, {"'" + o2.output + "': cluster 0", "/train and /valid"});
  // Tables declared far larger than the file's sequences (never written):
  // refused by count and shape before they are read.
  {
    H5Id f = h5_open_file(o2.output, true);
    H5Id table = h5_open_group(f, "clusters");
    const int64_t count = h5_read_attr_int64(table, "count");
    H5Ldelete(table, "sizes", H5P_DEFAULT);
    test::declare_int64_dataset(table, "sizes", hsize_t{1} << 36, 1 << 16).close();
    expect_data_error([&] { read_dataset_info(o2.output); },
                      {"/clusters/sizes in " + o2.output + " has shape [68719476736], expected [" +
                       std::to_string(count) + "] (one per cluster, count)"});
    h5_write_attr_int64(table, "count", int64_t{1} << 36);
  }
  expect_data_error([&] { read_dataset_info(o2.output); },
                    {"count = 68719476736 clusters for the file's", "a cluster has at least one member"});
  // The sequence-sampling loader does not read the clusters at all.
  lo.sampling = Sampling::Sequence;
  EXPECT_NO_THROW(DataLoader loader(lo));
}

}  // namespace
}  // namespace pf
