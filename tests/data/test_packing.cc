// Packing plans (data/packing.h): every protein placed exactly once, whole, or
// as one crop of L tokens when it is longer than a sample; no sample over L;
// the same plan for the same (seed, epoch) and another order for another
// epoch; the first-fit window; bad arguments refused; and at least 0.95 of
// the tokens useful at L = 2,048 and 8,192 on lengths shaped like UniProt's
// (median about 350, a long tail past 8,192).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/packing.h"
#include "data/sample.h"
#include "runtime/errors.h"
#include "runtime/random.h"

namespace pf {
namespace {

// Lengths (residues + <end>) from a log-normal keyed by (seed, index), median
// about 350, with one protein in 500 of 8,000-35,000 tokens.
std::vector<int64_t> protein_like_lengths(int64_t n, uint64_t seed) {
  const KeyedRandom rng(seed, 0, 0x1e9);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = std::max(rng.uniform(2 * static_cast<uint64_t>(i)), 1e-12),
                 u2 = rng.uniform(2 * static_cast<uint64_t>(i) + 1);
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    t[i] = i % 500 == 7 ? 8000 + static_cast<int64_t>(u2 * 27000) : 2 + static_cast<int64_t>(std::exp(5.85 + 0.75 * z));
  }
  return t;
}

void expect_valid(const PackingPlan& plan, const std::vector<int64_t>& tokens) {
  const int64_t L = plan.sample_length;
  std::vector<int> seen(tokens.size(), 0);
  int64_t useful = 0;
  for (const PackedSample& s : plan.samples) {
    int64_t used = 0;
    ASSERT_FALSE(s.segments.empty());
    for (const PackedSegment& g : s.segments) {
      const int64_t t = tokens[static_cast<size_t>(g.protein)];
      ++seen[static_cast<size_t>(g.protein)];
      if (t > L) {
        EXPECT_EQ(s.segments.size(), 1u) << "a cropped protein fills its sample alone";
        EXPECT_EQ(g.length, L);
        EXPECT_GE(g.start, 0);
        EXPECT_LE(g.start, t - L);
      } else {
        EXPECT_EQ(g.start, 0);
        EXPECT_EQ(g.length, t) << "protein " << g.protein << " split";
      }
      used += g.length;
    }
    EXPECT_EQ(used, s.used);
    EXPECT_LE(used, L);
    useful += used;
  }
  EXPECT_EQ(useful, plan.useful_tokens);
  for (size_t p = 0; p < tokens.size(); ++p) EXPECT_EQ(seen[p], 1) << "protein " << p;
}

TEST(Packing, PlacesEveryProteinOnceWithinTheSampleLength) {
  const std::vector<int64_t> tokens = protein_like_lengths(3000, 5);
  for (int64_t L : {1, 64, 1000, 2048, 8192, 65536})
    for (int64_t window : {1, 4, 64}) {
      SCOPED_TRACE(testing::Message() << "L=" << L << " window=" << window);
      expect_valid(plan_packing(tokens, L, 11, 0, window), tokens);
    }
}

TEST(Packing, SameSeedAndEpochSamePlanOtherEpochOtherOrder) {
  const std::vector<int64_t> tokens = protein_like_lengths(500, 6);
  auto proteins = [](const PackingPlan& plan) {
    std::vector<int64_t> order;
    for (const PackedSample& s : plan.samples)
      for (const PackedSegment& g : s.segments) order.push_back(g.protein);
    return order;
  };
  const PackingPlan a = plan_packing(tokens, 2048, 3, 1), b = plan_packing(tokens, 2048, 3, 1);
  EXPECT_EQ(proteins(a), proteins(b));
  EXPECT_NE(proteins(a), proteins(plan_packing(tokens, 2048, 3, 2)));
  EXPECT_NE(proteins(a), proteins(plan_packing(tokens, 2048, 4, 1)));
}

TEST(Packing, LongProteinsAreCroppedAsInSingleMode) {
  const std::vector<int64_t> tokens{10, 5000, 100, 300};
  const PackingPlan plan = plan_packing(tokens, 256, 9, 4);
  expect_valid(plan, tokens);
  for (const PackedSample& s : plan.samples)
    if (s.segments[0].protein == 1) {
      EXPECT_EQ(s.segments[0].start, crop_start(9, 4, 1, 5000, 256));
    }
}

TEST(Packing, FirstFitOverTheWindow) {
  // L = 10: 6 opens a sample, 6 does not fit it and opens a second, 4 fills
  // the first (closed, full), 3 goes into the second.
  const std::vector<int64_t> tokens{6, 6, 4, 3};
  const PackingPlan plan = plan_packing(tokens, 10, 1, 0, 2);
  expect_valid(plan, tokens);
  ASSERT_EQ(plan.samples.size(), 2u);
  EXPECT_EQ(plan.samples[0].used, 10);
  EXPECT_EQ(plan.samples[1].used, 9);
  // With a window of one, each sample closes when the next protein does not fit.
  EXPECT_EQ(plan_packing(std::vector<int64_t>{6, 6, 6}, 10, 1, 0, 1).samples.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.efficiency(), 19.0 / 20.0);
}

TEST(Packing, UsesAtLeast95PercentOfProteinLikeSamples) {
  const std::vector<int64_t> tokens = protein_like_lengths(20000, 7);
  for (int64_t L : {2048, 8192}) {
    const PackingPlan plan = plan_packing(tokens, L, 1, 0);
    EXPECT_GE(plan.efficiency(), 0.95) << "L=" << L << ": " << plan.samples.size() << " samples";
  }
}

TEST(Packing, RefusesBadArguments) {
  EXPECT_THROW(plan_packing({5}, 0, 1, 0), ValueError);
  EXPECT_THROW(plan_packing({5}, 8, 1, 0, 0), ValueError);
  EXPECT_THROW(plan_packing({5, 0, 3}, 8, 1, 0), ValueError);
  EXPECT_TRUE(plan_packing({}, 8, 1, 0).samples.empty());
}

}  // namespace
}  // namespace pf
