// Family contexts (data/family_contexts.h) and the loader's family mode on the
// real QUERY proteins with synthetic families of 1, 2, 3, 5, 8 members
// (tests/data/clustered_query.h):
//  - the contexts of an epoch: each family's members in a keyed order cut into
//    runs of at most L tokens (a longer member alone), every protein once with
//    sequence sampling, the first context of each family with cluster
//    sampling, orders that change with the epoch and the seed;
//  - the loader's samples hold each context's members back to back, read
//    straight from the file, each member after the first joining the one
//    before it with its count of relatives; the lookahead of a slice crosses
//    into the next member of a family and never into another family, at
//    sp = 2..4; members_alone gives the same tokens with no joins and no
//    crossing lookahead;
//  - a resumed position gives the same batches (tests/data/test_cluster_sampling.cc
//    runs the cluster-sampled family mode through the same checks as the other modes).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "data/family_contexts.h"
#include "data/loader.h"
#include "data/vocab.h"
#include "tests/data/clustered_query.h"
#include "tests/support/error_message.h"

namespace pf {
namespace {

using test::clustered;
using test::read_epoch;
using test::window_at;

LoaderOptions family_options(int64_t L, int64_t batch) {
  LoaderOptions o = test::cluster_options(SampleMode::Family, L, batch);
  o.sampling = Sampling::Sequence;
  return o;
}

TEST(FamilyContexts, EveryProteinOncePerEpochInRunsOfAtMostL) {
  // Families 0: {0, 1, 2, 3, 4}, 1: {5}, 2: {6, 7, 8} of 4, 9, 3, 5, 2, 30, 6, 6, 6 tokens.
  const SplitClusters families(std::vector<int64_t>{0, 0, 0, 0, 0, 1, 2, 2, 2});
  const std::vector<int64_t> tokens = {4, 9, 3, 5, 2, 30, 6, 6, 6};
  const int64_t L = 12;
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    const auto contexts = family_contexts(families, tokens, L, 5, epoch, Sampling::Sequence);
    std::vector<int64_t> seen, family_of_context;
    for (const auto& c : contexts) {
      int64_t t = 0;
      for (int64_t p : c) {
        t += tokens[static_cast<size_t>(p)];
        seen.push_back(p);
      }
      const int64_t f = c[0] < 5 ? 0 : c[0] == 5 ? 1 : 2;
      for (int64_t p : c) EXPECT_EQ(p < 5 ? 0 : p == 5 ? 1 : 2, f) << "a context mixes families";
      EXPECT_TRUE(t <= L || c.size() == 1) << "epoch " << epoch << ": a context of " << t << " tokens";
      family_of_context.push_back(f);
    }
    EXPECT_TRUE(std::is_sorted(family_of_context.begin(), family_of_context.end())) << "families in cluster order";
    // Greedy: a context closes only when its family's next member does not fit.
    for (size_t k = 0; k + 1 < contexts.size(); ++k) {
      if (family_of_context[k] != family_of_context[k + 1]) continue;
      int64_t t = 0;
      for (int64_t p : contexts[k]) t += tokens[static_cast<size_t>(p)];
      EXPECT_GT(t + tokens[static_cast<size_t>(contexts[k + 1][0])], L);
    }
    std::vector<int64_t> all = seen;
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8})) << "epoch " << epoch;
    orders.insert(seen);
    // Cluster sampling: the first context of each family, nothing else.
    const auto first = family_contexts(families, tokens, L, 5, epoch, Sampling::Cluster);
    ASSERT_EQ(first.size(), 3u);
    size_t k = 0;
    for (const auto& c : first) {
      while (contexts[k] != c) ++k;  // the same context, in the same order
      EXPECT_TRUE(k == 0 || family_of_context[k - 1] != family_of_context[k]) << "not its family's first context";
    }
  }
  EXPECT_GT(orders.size(), 4u) << "the member order is drawn per epoch";
  EXPECT_NE(family_contexts(families, tokens, L, 5, 0, Sampling::Sequence),
            family_contexts(families, tokens, L, 6, 0, Sampling::Sequence))
      << "the member order is keyed by the seed";
  EXPECT_THROW(family_contexts(families, tokens, 0, 5, 0, Sampling::Sequence), ValueError);
}

// Every sample of an epoch against the file: the members of a context back to
// back (one family), each after the first joining, its relatives counted.
TEST(FamilyLoader, SamplesHoldEachContextsMembersBackToBack) {
  const test::ClusteredQuery& q = clustered();
  for (int64_t L : {int64_t{700}, int64_t{2048}}) {
    DataLoader loader(family_options(L, 3));
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<int64_t> placed;
      int64_t joined = 0;
      for (const Batch& b : read_epoch(loader))
        for (int64_t r = 0; r < b.batch_size; ++r) {
          if (!b.samples[static_cast<size_t>(r)].valid) continue;
          const std::vector<SliceSegment>& segs = b.segments[static_cast<size_t>(r)];
          for (size_t k = 0; k < segs.size(); ++k) {
            const SliceSegment& s = segs[k];
            if (s.protein < 0) {
              ASSERT_EQ(k + 1, segs.size()) << "padding only at the end";
              continue;
            }
            placed.push_back(s.protein);
            const int64_t t = static_cast<int64_t>(q.windows[static_cast<size_t>(s.protein)].size());
            const int64_t c = t > L ? crop_start(23, epoch, s.protein, t, L) : 0;
            const int64_t end = k + 1 < segs.size() ? segs[k + 1].begin : L;
            ASSERT_EQ(s.position, 0);
            ASSERT_EQ(s.joins, s.relatives > 0);
            if (s.joins) {
              ++joined;
              ASSERT_GT(k, 0u);
              ASSERT_EQ(q.train_clusters[static_cast<size_t>(s.protein)],
                        q.train_clusters[static_cast<size_t>(segs[k - 1].protein)]);
              ASSERT_EQ(s.relatives, segs[k - 1].relatives + 1);
            } else if (k > 0 && segs[k - 1].protein >= 0) {
              ASSERT_EQ(s.relatives, 0);
            }
            for (int64_t x = s.begin; x < end; ++x)
              ASSERT_EQ(b.tokens[static_cast<size_t>(r * L + x)], window_at(s.protein, c + x - s.begin));
          }
        }
      std::sort(placed.begin(), placed.end());
      std::vector<int64_t> all(q.windows.size());
      for (size_t p = 0; p < all.size(); ++p) all[p] = static_cast<int64_t>(p);
      ASSERT_EQ(placed, all) << "L " << L << " epoch " << epoch << ": every protein once";
      EXPECT_GT(joined, 0);
    }
  }
}

// Slices of sp = 2..4 against the whole sample: the same tokens and segments,
// and the lookahead of every rank's slice is the whole sample's next token
// where the member holding the slice's last row goes on there or is followed
// by a member that joins it; padding otherwise.
TEST(FamilyLoader, LookaheadCrossesIntoTheNextMemberOnlyInsideAFamily) {
  const int64_t B = 3;
  for (bool alone : {false, true}) {
    int64_t crossing = 0;
    for (int64_t L : {int64_t{840}, int64_t{600}, int64_t{720}}) {  // divisible by 2, 3, 4
      LoaderOptions wo = family_options(L, B);
      wo.members_alone = alone;
      DataLoader whole(wo);
      const std::vector<Batch> expect = read_epoch(whole);
      for (int64_t sp = 2; sp <= 4; ++sp) {
        const int64_t n = L / sp;
        for (int64_t r = 0; r + 1 < sp; ++r) {
          LoaderOptions o = wo;
          o.sp_size = sp;
          o.sp_rank = r;
          DataLoader loader(o);
          for (const Batch& w : expect) {
            const Batch b = loader.next();
            for (int64_t row = 0; row < B; ++row) {
              if (!w.samples[static_cast<size_t>(row)].valid) continue;
              for (int64_t x = 0; x < n; ++x)
                ASSERT_EQ(b.tokens[static_cast<size_t>(row * n + x)],
                          w.tokens[static_cast<size_t>(row * L + r * n + x)]);
              // The whole sample's segment holding position p.
              const std::vector<SliceSegment>& segs = w.segments[static_cast<size_t>(row)];
              auto segment_at = [&](int64_t p) {
                size_t k = 0;
                while (k + 1 < segs.size() && segs[k + 1].begin <= p) ++k;
                return segs[k];
              };
              const SliceSegment last = segment_at((r + 1) * n - 1), next = segment_at((r + 1) * n);
              const bool goes_on = next.begin < (r + 1) * n || (next.joins && next.begin == (r + 1) * n);
              const uint8_t want =
                  next.protein >= 0 && goes_on ? w.tokens[static_cast<size_t>(row * L + (r + 1) * n)] : Vocab::kPad;
              ASSERT_EQ(b.lookahead[static_cast<size_t>(row)], want) << "L " << L << " sp " << sp << " rank " << r;
              crossing += last.protein != next.protein && want != Vocab::kPad;
              const SliceSegment at_edge = segment_at(r * n);
              ASSERT_EQ(b.segments[static_cast<size_t>(row)][0].joins, at_edge.joins && at_edge.begin == r * n);
            }
          }
        }
      }
    }
    if (alone)
      EXPECT_EQ(crossing, 0) << "members_alone: no lookahead into another member";
    else
      EXPECT_GT(crossing, 0) << "no rank edge fell on a member boundary inside a family: the test checks nothing";
  }
}

TEST(FamilyLoader, MembersAloneReadsTheSameTokensWithoutJoins) {
  LoaderOptions o = family_options(1024, 4);
  DataLoader with(o);
  o.members_alone = true;
  DataLoader alone(o);
  for (int i = 0; i < 5; ++i) {
    const Batch a = with.next(), b = alone.next();
    ASSERT_EQ(a.tokens, b.tokens);
    for (size_t r = 0; r < a.segments.size(); ++r) {
      ASSERT_EQ(a.segments[r].size(), b.segments[r].size());
      for (size_t k = 0; k < a.segments[r].size(); ++k) {
        ASSERT_EQ(a.segments[r][k].protein, b.segments[r][k].protein);
        ASSERT_EQ(a.segments[r][k].relatives, b.segments[r][k].relatives);
        ASSERT_FALSE(b.segments[r][k].joins);
      }
    }
  }
}

TEST(FamilyLoader, UnclusteredFilesAreAClearError) {
  test::TempDir dir;
  PrepareOptions p;
  p.inputs = {test::kQueryFasta};
  p.output = dir.file("plain.h5");
  prepare_dataset(p);
  LoaderOptions o = family_options(512, 2);
  o.files = {p.output};
  test::expect_error_naming<DataError>([&] { DataLoader loader(o); },
                                      {"data.mode = \"family\"", "'" + p.output + "'", "split by sequence hash"});
  EXPECT_EQ(parse_sample_mode("family"), SampleMode::Family);
  EXPECT_STREQ(sample_mode_name(SampleMode::Family), "family");
}

}  // namespace
}  // namespace pf
