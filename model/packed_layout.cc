#include "model/packed_layout.h"

#include <algorithm>

#include "runtime/check.h"

namespace pf {

int64_t PackedLayout::piece_length(int64_t b, size_t i, int64_t n) const {
  const std::vector<SequencePiece>& p = samples[static_cast<size_t>(b)];
  return (i + 1 < p.size() ? p[i + 1].begin : n) - p[i].begin;
}

PackedLayout PackedLayout::state_segments() const {
  PackedLayout out;
  out.samples.reserve(samples.size());
  for (const std::vector<SequencePiece>& pieces : samples) {
    std::vector<SequencePiece> merged;
    for (size_t i = 0; i < pieces.size(); ++i)
      if (i == 0 || !pieces[i].joins) merged.push_back(pieces[i]);
    out.samples.push_back(std::move(merged));
  }
  return out;
}

bool PackedLayout::starts_sequence(int64_t b) const {
  for (const SequencePiece& p : samples[static_cast<size_t>(b)])
    if (p.starts()) return true;
  return false;
}

void PackedLayout::check(int64_t B, int64_t n) const {
  if (empty()) return;
  PF_REQUIRE(ValueError, static_cast<int64_t>(samples.size()) == B,
             "packed layout describes " << samples.size() << " samples, the batch has " << B);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<SequencePiece>& p = samples[static_cast<size_t>(b)];
    if (n == 0 && p.empty()) continue;  // a rank without rows
    PF_REQUIRE(ValueError, !p.empty() && p[0].begin == 0,
               "packed layout: sample " << b << " must have a first piece at row 0");
    for (size_t i = 0; i < p.size(); ++i) {
      PF_REQUIRE(ValueError, p[i].position >= 0 && (i == 0 || p[i].position == 0),
                 "packed layout: sample " << b << " piece " << i << " at position " << p[i].position
                                          << " (only the first piece may continue a sequence)");
      PF_REQUIRE(ValueError, !p[i].joins || p[i].position == 0,
                 "packed layout: sample " << b << " piece " << i << " joins the sequence before it but starts at "
                                          << "position " << p[i].position << " of its own sequence");
      PF_REQUIRE(ValueError, piece_length(b, i, n) > 0 && p[i].begin < n,
                 "packed layout: sample " << b << " piece " << i << " at row " << p[i].begin
                                          << " is empty or outside the " << n << " rows");
    }
  }
}

void SampleSequences::add(int64_t length, uint64_t key, bool joins) {
  PF_REQUIRE(ValueError, length >= 1, "packed layout: sequence " << count() << " of " << length << " positions");
  start_.push_back(end() + length);
  keys_.push_back(key);
  joins_.push_back(joins ? 1 : 0);
}

int64_t SampleSequences::sequence_at(int64_t x) const {
  return static_cast<int64_t>(std::upper_bound(start_.begin(), start_.end(), x) - start_.begin()) - 1;
}

std::vector<SequencePiece> SampleSequences::pieces(int64_t begin, int64_t end) const {
  std::vector<SequencePiece> p;
  if (begin == end) return p;
  PF_REQUIRE(ValueError, begin < end && begin >= start_.front() && end <= this->end(),
             "packed layout: rows [" << begin << ", " << end << ") outside the sequences at [" << start_.front() << ", "
                                     << this->end() << ")");
  for (int64_t k = sequence_at(begin); k < count() && start(k) < end; ++k) {
    const int64_t lo = std::max(start(k), begin);
    p.push_back({lo - begin, lo - start(k), keys_[static_cast<size_t>(k)],
                 joins_[static_cast<size_t>(k)] != 0 && lo == start(k)});
  }
  return p;
}

}  // namespace pf
