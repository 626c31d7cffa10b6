// The packed data mode (data/packed_samples.h) on the prepared real data:
// every sample built independently from the whole split and the plan (whole
// proteins with their <end>, crops of the long ones keyed by epoch, padding
// after the last), every protein of the split in exactly one sample per
// epoch, the slices of sp = 1..4 joining to the sample with segments that
// continue across rank edges (positions inside the protein, the lookahead
// <pad> where a protein ends at the edge), useful tokens as planned, and a
// restored position giving the same batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "data/h5.h"
#include "data/loader.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

// Every protein of the train split as residues then <end>.
std::vector<std::vector<uint8_t>> windows(const std::string& path) {
  H5Id f = h5_open_file(path);
  H5Id g = h5_open_group(f, "train");
  const auto tokens = h5_read_array<uint8_t>(g, "tokens");
  const auto offsets = h5_read_array<int64_t>(g, "offsets");
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    out.emplace_back(tokens.begin() + offsets[i], tokens.begin() + offsets[i + 1]);
    out.back().push_back(Vocab::kEnd);
  }
  return out;
}

struct Expected {
  std::vector<uint8_t> tokens;  // L + 1 (the lookahead of the last position last)
  std::vector<SliceSegment> segments;
  int64_t used = 0;
};

// Sample s of epoch e from the plan and the proteins, the straightforward way.
Expected expected_sample(const PackingPlan& plan, const std::vector<std::vector<uint8_t>>& w, int64_t L, uint64_t seed,
                         int64_t epoch, int64_t s) {
  Expected e;
  e.tokens.assign(static_cast<size_t>(L + 1), Vocab::kPad);
  int64_t x = 0;
  for (const PackedSegment& seg : plan.samples[static_cast<size_t>(s)].segments) {
    const std::vector<uint8_t>& p = w[static_cast<size_t>(seg.protein)];
    const int64_t t = static_cast<int64_t>(p.size());
    const int64_t c = t > L ? crop_start(seed, epoch, seg.protein, t, L) : 0;
    for (int64_t i = 0; i < seg.length; ++i) e.tokens[static_cast<size_t>(x + i)] = p[static_cast<size_t>(c + i)];
    // A crop's last position predicts the protein's next token.
    if (t > L && c + L < t) e.tokens[static_cast<size_t>(L)] = p[static_cast<size_t>(c + L)];
    e.segments.push_back({x, 0, seg.protein});
    x += seg.length;
  }
  if (x < L) e.segments.push_back({x, 0, -1});
  e.used = x;
  return e;
}

LoaderOptions packed_options(int64_t L) {
  LoaderOptions o;
  o.files = {test::prepared_real().path};
  o.mode = SampleMode::Packed;
  o.sample_length = L;
  o.batch_size = 4;
  o.seed = 31;
  return o;
}

TEST(PackedLoader, SamplesHoldWholeProteinsOrOneCropAndEveryProteinOncePerEpoch) {
  const int64_t L = 1200;  // a few percent of the proteins are longer
  const LoaderOptions o = packed_options(L);
  const auto w = windows(o.files[0]);
  DataLoader loader(o);
  ASSERT_NE(loader.packed(), nullptr);
  const PackingPlan& plan = loader.packed()->plan();
  std::map<int64_t, int> seen;
  int64_t crops = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    seen.clear();
    for (int64_t step = 0; step < loader.steps_per_epoch(); ++step) {
      const Batch b = loader.next();
      ASSERT_EQ(b.position.epoch, epoch);
      ASSERT_EQ(b.segments.size(), static_cast<size_t>(b.batch_size));
      for (int64_t r = 0; r < b.batch_size; ++r) {
        const SampleInfo& info = b.samples[static_cast<size_t>(r)];
        if (!info.valid) {
          ASSERT_EQ(b.segments[static_cast<size_t>(r)].size(), 1u);
          continue;
        }
        const Expected e = expected_sample(plan, w, L, o.seed, epoch, info.sample);
        ASSERT_TRUE(std::equal(e.tokens.begin(), e.tokens.end() - 1, b.tokens.begin() + r * L)) << info.sample;
        ASSERT_EQ(b.lookahead[static_cast<size_t>(r)], e.tokens.back());
        ASSERT_EQ(info.source_length, e.used);
        ASSERT_EQ(useful_tokens(SampleMode::Packed, info, L), e.used);
        const auto& segs = b.segments[static_cast<size_t>(r)];
        ASSERT_EQ(segs.size(), e.segments.size());
        for (size_t k = 0; k < segs.size(); ++k) {
          EXPECT_EQ(segs[k].begin, e.segments[k].begin);
          EXPECT_EQ(segs[k].position, 0);
          EXPECT_EQ(segs[k].protein, e.segments[k].protein);
          if (segs[k].protein >= 0) {
            ++seen[segs[k].protein];
            crops += static_cast<int64_t>(w[static_cast<size_t>(segs[k].protein)].size()) > L;
          }
        }
      }
    }
    ASSERT_EQ(seen.size(), w.size()) << "epoch " << epoch;
    for (const auto& [p, count] : seen) ASSERT_EQ(count, 1) << "protein " << p << " in epoch " << epoch;
  }
  EXPECT_GT(crops, 0);
  EXPECT_GE(plan.efficiency(), 0.95);
}

TEST(PackedLoader, SlicesOfSp1To4JoinToTheSampleWithContinuingSegments) {
  const int64_t L = 2400;  // divisible by 1..4
  const LoaderOptions base = packed_options(L);
  DataLoader one(base);
  std::vector<Batch> full;
  for (int i = 0; i < 3; ++i) full.push_back(one.next());
  for (int64_t sp = 2; sp <= 4; ++sp) {
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int64_t k = 0; k < sp; ++k) {
      LoaderOptions o = base;
      o.sp_size = sp;
      o.sp_rank = k;
      o.prefetch = k % 2 ? 0 : 2;
      ranks.push_back(std::make_unique<DataLoader>(o));
    }
    for (const Batch& b : full) {
      std::vector<uint8_t> joined(b.tokens.size());
      for (int64_t k = 0; k < sp; ++k) {
        const Batch s = ranks[static_cast<size_t>(k)]->next();
        const int64_t n = s.slice_length, off = s.global_offset;
        for (int64_t r = 0; r < b.batch_size; ++r) {
          std::copy(s.tokens.begin() + r * n, s.tokens.begin() + (r + 1) * n, joined.begin() + r * L + off);
          // The slice's segments are the sample's, cut at the rank edges.
          const auto& whole = b.segments[static_cast<size_t>(r)];
          const auto& part = s.segments[static_cast<size_t>(r)];
          std::vector<SliceSegment> want;
          for (size_t g = 0; g < whole.size(); ++g) {
            const int64_t lo = whole[g].begin, hi = g + 1 < whole.size() ? whole[g + 1].begin : L;
            const int64_t a = std::max(lo, off), e = std::min(hi, off + n);
            if (a < e) want.push_back({a - off, a - lo, whole[g].protein});
            // Lookahead: the next token of the same run, <pad> where a run ends at the edge.
            if (k + 1 < sp && off + n - 1 >= lo && off + n - 1 < hi) {
              const uint8_t next = off + n < hi ? b.tokens[static_cast<size_t>(r * L + off + n)] : Vocab::kPad;
              ASSERT_EQ(s.lookahead[static_cast<size_t>(r)], whole[g].protein >= 0 ? next : Vocab::kPad);
            }
          }
          ASSERT_EQ(part.size(), want.size()) << "sp " << sp << " rank " << k;
          for (size_t g = 0; g < want.size(); ++g) {
            EXPECT_EQ(part[g].begin, want[g].begin);
            EXPECT_EQ(part[g].position, want[g].position);
            EXPECT_EQ(part[g].protein, want[g].protein);
          }
          if (k + 1 == sp) {
            ASSERT_EQ(s.lookahead[static_cast<size_t>(r)], b.lookahead[static_cast<size_t>(r)]);
          }
        }
      }
      ASSERT_EQ(joined, b.tokens) << "sp " << sp;
    }
  }
}

TEST(PackedLoader, RestoredPositionSeesTheSameBatches) {
  LoaderOptions o = packed_options(4096);
  DataLoader a(o);
  a.next();
  const LoaderPosition saved = a.position();
  std::vector<Batch> rest;
  for (int i = 0; i < a.steps_per_epoch() + 1; ++i) rest.push_back(a.next());  // into the next epoch
  DataLoader b(o);
  b.set_position(saved);
  for (const Batch& expect : rest) {
    const Batch got = b.next();
    ASSERT_EQ(got.position, expect.position);
    ASSERT_EQ(got.tokens, expect.tokens);
    ASSERT_EQ(got.lookahead, expect.lookahead);
    ASSERT_EQ(got.segments.size(), expect.segments.size());
    for (size_t r = 0; r < got.segments.size(); ++r) {
      ASSERT_EQ(got.segments[r].size(), expect.segments[r].size());
      for (size_t g = 0; g < got.segments[r].size(); ++g)
        ASSERT_EQ(got.segments[r][g].protein, expect.segments[r][g].protein);
    }
  }
}

}  // namespace
}  // namespace pf
