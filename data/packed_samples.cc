// Packed samples: see packed_samples.h.
#include "data/packed_samples.h"

#include <algorithm>

#include "data/vocab.h"
#include "runtime/check.h"

namespace pf {

PackedSamples::PackedSamples(ProteinShards& shards, int64_t sample_length, uint64_t seed, int64_t window)
    : sample_length_(sample_length) {
  PF_REQUIRE(ValueError, sample_length > 0, "sample length must be positive, got " << sample_length);
  if (shards.num_proteins() < 1) {
    const std::string files = shards.file_list();
    PF_REQUIRE(DataError, false,
               "split '" << shards.split() << "' of " << files << " holds no protein to pack (data.mode = packed)");
  }
  std::vector<int64_t> tokens = shards.protein_lengths();
  for (int64_t& t : tokens) t += 1;  // its <end>
  plan_ = plan_packing(tokens, sample_length, seed, 0, window);
  tokens_ = std::make_shared<const std::vector<int64_t>>(std::move(tokens));
}

namespace {

std::vector<std::vector<int64_t>> one_per_context(const std::vector<int64_t>& proteins) {
  std::vector<std::vector<int64_t>> contexts;
  contexts.reserve(proteins.size());
  for (int64_t p : proteins) contexts.push_back({p});
  return contexts;
}

}  // namespace

PackedSamples::PackedSamples(std::shared_ptr<const std::vector<int64_t>> tokens, const std::vector<int64_t>& proteins,
                             int64_t sample_length, uint64_t seed, int64_t epoch, int64_t window)
    : PackedSamples(std::move(tokens), one_per_context(proteins), sample_length, seed, epoch, window) {}

PackedSamples::PackedSamples(std::shared_ptr<const std::vector<int64_t>> tokens,
                             const std::vector<std::vector<int64_t>>& contexts, int64_t sample_length, uint64_t seed,
                             int64_t epoch, int64_t window)
    : sample_length_(sample_length), tokens_(std::move(tokens)) {
  PF_REQUIRE(ValueError, sample_length > 0, "sample length must be positive, got " << sample_length);
  PF_REQUIRE(ValueError, !contexts.empty(), "packed samples of epoch " << epoch << ": no protein to pack");
  std::vector<int64_t> sub(contexts.size(), 0);
  for (size_t c = 0; c < contexts.size(); ++c) {
    PF_REQUIRE(ValueError, !contexts[c].empty(), "packed samples of epoch " << epoch << ": context " << c
                                                                            << " has no protein");
    for (int64_t p : contexts[c]) sub[c] += tokens_->at(static_cast<size_t>(p));
    PF_REQUIRE(ValueError, contexts[c].size() == 1 || sub[c] <= sample_length,
               "packed samples of epoch " << epoch << ": context " << c << " of " << contexts[c].size()
                                          << " proteins holds " << sub[c] << " tokens, more than the sample length "
                                          << sample_length);
  }
  plan_ = plan_packing(sub, sample_length, seed, epoch, window);
  // Each unit back to its proteins in the split's numbering, which keys the crops.
  for (PackedSample& ps : plan_.samples) {
    std::vector<PackedSegment> members;
    for (const PackedSegment& unit : ps.segments) {
      const std::vector<int64_t>& ctx = contexts[static_cast<size_t>(unit.protein)];
      if (ctx.size() == 1) {
        const int64_t p = ctx[0], t = (*tokens_)[static_cast<size_t>(p)];
        members.push_back({p, t > sample_length ? crop_start(seed, epoch, p, t, sample_length) : 0, unit.length});
        continue;
      }
      for (size_t k = 0; k < ctx.size(); ++k)
        members.push_back({ctx[k], 0, (*tokens_)[static_cast<size_t>(ctx[k])], static_cast<int64_t>(k)});
    }
    ps.segments = std::move(members);
  }
}

SampleInfo PackedSamples::read_slice(ProteinShards& shards, uint64_t seed, int64_t epoch, int64_t sample, int64_t begin,
                                     int64_t end, uint8_t* out, uint8_t* lookahead,
                                     std::vector<SliceSegment>* segments, bool members_alone) const {
  const int64_t L = sample_length_;
  PF_REQUIRE(ValueError, 0 <= begin && begin < end && end <= L,
             "slice [" << begin << ", " << end << ") outside a sample of length " << L);
  PF_REQUIRE(ValueError, sample >= 0 && sample < count(),
             "packed sample " << sample << " outside [0, " << count() << ")");
  const PackedSample& ps = plan_.samples[static_cast<size_t>(sample)];
  SampleInfo info;
  info.sample = sample;
  info.valid = true;
  info.source_length = ps.used;
  std::fill(out, out + (end - begin), Vocab::kPad);
  if (lookahead) *lookahead = Vocab::kPad;
  std::vector<SliceSegment> segs;
  int64_t x = 0;  // sample position of the segment's first token
  for (size_t k = 0; k < ps.segments.size(); ++k) {
    const PackedSegment& seg = ps.segments[k];
    const int64_t lo = std::max(x, begin), hi = std::min(x + seg.length, end);
    if (lo < hi) {
      const int64_t t = (*tokens_)[static_cast<size_t>(seg.protein)];
      const int64_t c = t > L ? crop_start(seed, epoch, seg.protein, t, L) : 0;
      // The lookahead comes with the last run: the protein's window goes on past its segment.
      const bool with_lookahead = lookahead && hi == end;
      std::vector<uint8_t> buf(static_cast<size_t>(hi - lo + (with_lookahead ? 1 : 0)));
      const ProteinSpan span = shards.locate(seg.protein);
      shards.read_window(span, c + lo - x, c + lo - x + static_cast<int64_t>(buf.size()), buf.data());
      std::copy(buf.begin(), buf.begin() + (hi - lo), out + (lo - begin));
      if (with_lookahead && (hi < x + seg.length || t > L)) *lookahead = buf.back();
      // A member that ends at `end`, followed by one that joins it: its first token.
      if (with_lookahead && !members_alone && hi == x + seg.length && k + 1 < ps.segments.size() &&
          ps.segments[k + 1].relatives > 0)
        shards.read_window(shards.locate(ps.segments[k + 1].protein), 0, 1, lookahead);
      segs.push_back({lo - begin, lo - x, seg.protein, seg.relatives, !members_alone && seg.relatives > 0 && lo == x});
    }
    x += seg.length;
  }
  if (std::max(x, begin) < end) segs.push_back({std::max(x, begin) - begin, std::max(x, begin) - x, -1});
  if (segments) *segments = std::move(segs);
  return info;
}

}  // namespace pf
