// The one builder of packed layouts (SampleSequences, model/packed_layout.h)
// against the rule written row by row, and the users that lay their samples
// out with it:
//  - every slice [begin, end) of samples of several sequences (families whose
//    members join, one-member sequences, padding, a first sequence that began
//    before position 0 of the row): one piece per sequence met, its first
//    local row, the position of that row in its sequence, its key, and
//    `joins` only where the piece starts its sequence; every layout passes
//    PackedLayout::check;
//  - training's batches (to_token_batch, launch/core/session.h): the slice
//    segments of a family sample, cut as the loader cuts them for sp = 1..5,
//    become the pieces the loader's segments name, field by field;
//  - a sequence of no positions and a slice outside the sequences are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "launch/core/session.h"
#include "model/packed_layout.h"
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/grid.h"

namespace pf {
namespace {

struct Seq {
  int64_t length;
  uint64_t key;
  bool joins;
};

// The pieces of rows [begin, end), found row by row.
std::vector<SequencePiece> by_rows(int64_t first, const std::vector<Seq>& seqs, int64_t begin, int64_t end) {
  std::vector<SequencePiece> out;
  int64_t previous = -1;
  for (int64_t x = begin; x < end; ++x) {
    int64_t k = 0, start = first;
    while (x >= start + seqs[static_cast<size_t>(k)].length) start += seqs[static_cast<size_t>(k++)].length;
    if (k == previous) continue;
    previous = k;
    const Seq& s = seqs[static_cast<size_t>(k)];
    out.push_back({x - begin, x - start, s.key, s.joins && x == start});
  }
  return out;
}

void expect_same(const std::vector<SequencePiece>& got, const std::vector<SequencePiece>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].begin, want[i].begin) << what << " piece " << i;
    EXPECT_EQ(got[i].position, want[i].position) << what << " piece " << i;
    EXPECT_EQ(got[i].key, want[i].key) << what << " piece " << i;
    EXPECT_EQ(got[i].joins, want[i].joins) << what << " piece " << i;
  }
}

TEST(SampleSequences, EverySliceAgainstTheRowRule) {
  const std::vector<std::pair<int64_t, std::vector<Seq>>> samples = {
      {0, {{5, 10, false}, {3, 11, true}, {4, 12, true}, {6, 13, false}, {2, 14, true}, {4, ~uint64_t{0}, false}}},
      {0, {{1, 0, false}, {1, 1, false}, {1, 2, true}, {9, 3, false}}},
      {-4, {{7, 20, false}, {5, 21, true}}},  // the first began 4 rows before
      {3, {{8, 30, false}}},
  };
  for (size_t t = 0; t < samples.size(); ++t) {
    const auto& [first, seqs] = samples[t];
    SampleSequences row(first);
    for (const Seq& s : seqs) row.add(s.length, s.key, s.joins);
    ASSERT_EQ(row.count(), static_cast<int64_t>(seqs.size()));
    for (int64_t begin = row.start(0); begin <= row.end(); ++begin)
      for (int64_t end = begin; end <= row.end(); ++end) {
        const std::string what =
            "sample " + std::to_string(t) + " rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        const std::vector<SequencePiece> got = row.pieces(begin, end);
        expect_same(got, by_rows(first, seqs, begin, end), what);
        PackedLayout layout;
        layout.samples.push_back(got);
        EXPECT_NO_THROW(layout.check(1, end - begin)) << what;
      }
    for (int64_t x = row.start(0); x < row.end(); ++x) {
      const int64_t k = row.sequence_at(x);
      EXPECT_TRUE(row.start(k) <= x && x < row.start(k + 1)) << "sample " << t << " position " << x;
    }
  }
}

TEST(SampleSequences, RefusesEmptySequencesAndSlicesOutsideThem) {
  SampleSequences row;
  EXPECT_THROW(row.add(0, 1), ValueError);
  row.add(4, 1);
  row.add(2, 2, true);
  EXPECT_THROW(row.pieces(-1, 3), ValueError);
  EXPECT_THROW(row.pieces(2, 7), ValueError);
  EXPECT_THROW(row.pieces(3, 2), ValueError);
  EXPECT_TRUE(row.pieces(6, 6).empty());
}

// The loader's slice segments of one packed sample (as PackedSamples::
// read_slice cuts them): each unit's run in [begin, end), joins where a
// later member of a family starts in the slice, then the padding.
std::vector<SliceSegment> loader_segments(const std::vector<Seq>& units, int64_t begin, int64_t end) {
  std::vector<SliceSegment> segs;
  int64_t x = 0;
  for (const Seq& u : units) {
    const int64_t lo = std::max(x, begin), hi = std::min(x + u.length, end);
    if (lo < hi) segs.push_back({lo - begin, lo - x, static_cast<int64_t>(u.key), u.joins ? 1 : 0, u.joins && lo == x});
    x += u.length;
  }
  if (std::max(x, begin) < end) segs.push_back({std::max(x, begin) - begin, std::max(x, begin) - x, -1});
  return segs;
}

TEST(SampleSequences, TrainingBatchesKeepTheLoadersSegments) {
  constexpr int64_t L = 60;
  ParallelGrid grid(make_local_comm(), 1);  // (the lookahead rule is not under test)
  // Two samples: families {7, 4, 9} and {5, 6}, then padding; one-member
  // units and a family of short members.
  const std::vector<std::vector<Seq>> samples = {
      {{7, 100, false}, {4, 101, true}, {9, 102, true}, {5, 103, false}, {6, 104, true}},
      {{3, 200, false}, {2, 201, true}, {2, 202, true}, {2, 203, true}, {20, 204, false}, {28, 205, false}}};
  for (int sp = 1; sp <= 5; ++sp) {
    for (int r = 0; r < sp; ++r) {
      const int64_t begin = L * r / sp, end = L * (r + 1) / sp;
      Batch b;
      b.batch_size = static_cast<int64_t>(samples.size());
      b.slice_length = end - begin;
      b.global_offset = begin;
      b.tokens.assign(static_cast<size_t>(b.batch_size * b.slice_length), 4);
      b.lookahead.assign(static_cast<size_t>(b.batch_size), 0);
      b.samples.resize(static_cast<size_t>(b.batch_size));
      for (const std::vector<Seq>& s : samples) b.segments.push_back(loader_segments(s, begin, end));
      const TokenBatch t = to_token_batch(b, grid);
      ASSERT_EQ(t.packed.samples.size(), samples.size());
      for (size_t s = 0; s < samples.size(); ++s) {
        std::vector<SequencePiece> want;  // the loader's segments, field by field
        for (const SliceSegment& g : b.segments[s])
          want.push_back(
              {g.begin, g.position, g.protein >= 0 ? static_cast<uint64_t>(g.protein) : ~uint64_t{0}, g.joins});
        expect_same(t.packed.samples[s], want,
                    "sp " + std::to_string(sp) + " rank " + std::to_string(r) + " sample " + std::to_string(s));
      }
      EXPECT_NO_THROW(t.packed.check(b.batch_size, b.slice_length));
    }
  }
}

}  // namespace
}  // namespace pf
