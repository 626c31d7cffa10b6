// Hyperslab reads of protein data shards: see protein_shards.h.
#include "data/protein_shards.h"

#include <algorithm>
#include <vector>

#include "data/schema.h"
#include "data/vocab.h"

namespace pf {

namespace {

constexpr int64_t kChunkCacheBytes = 8 << 20;  // per dataset: a few decompressed chunks
constexpr int64_t kLengthBlock = 1 << 16;      // offsets read per block by protein_lengths (512 KiB)

}  // namespace

ProteinShards::ProteinShards(const std::vector<std::string>& paths, const std::string& split) : split_(split) {
  PF_REQUIRE(ValueError, !paths.empty(), "no data files given");
  PF_REQUIRE(ValueError, split == "train" || split == "valid" || split == "test" || split == kOodSplitName,
             "unknown split '" << split << "': expected train, valid, test or ood");
  shards_.reserve(paths.size());
  for (const std::string& path : paths) {
    PreparedData data = open_prepared_data(path);
    PreparedSplit opened = data.open_split(split, kChunkCacheBytes);
    Shard s{std::move(data), std::move(opened.tokens), std::move(opened.offsets)};
    s.proteins = opened.extent.sequences;
    s.residues = opened.extent.residues;
    s.first_protein = num_proteins_;
    s.stream_start = num_residues_ + num_proteins_;
    num_proteins_ += s.proteins;
    num_residues_ += s.residues;
    shards_.push_back(std::move(s));
  }
  reset_counters();
}

std::string ProteinShards::file_list() const {
  std::string files;
  for (const Shard& s : shards_) files += (files.empty() ? "" : ", ") + s.data.path();
  return files;
}

ReadCounters ProteinShards::counters() const {
  return ReadCounters{token_bytes_.load(), offset_bytes_.load(), reads_.load()};
}

void ProteinShards::reset_counters() {
  token_bytes_ = 0;
  offset_bytes_ = 0;
  reads_ = 0;
}

std::vector<int64_t> ProteinShards::protein_lengths() {
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<size_t>(num_proteins_));
  std::vector<int64_t> block;
  for (Shard& s : shards_)
    for (int64_t first = 0; first < s.proteins; first += kLengthBlock) {
      const int64_t n = std::min(kLengthBlock, s.proteins - first) + 1;
      block.resize(static_cast<size_t>(n));
      h5_read_range(s.offsets, first, n, block.data());
      for (int64_t k = 0; k + 1 < n; ++k) lengths.push_back(block[static_cast<size_t>(k + 1)] - block[static_cast<size_t>(k)]);
    }
  return lengths;
}

void ProteinShards::read_offsets(Shard& s, int64_t first, int64_t count, int64_t* out) {
  h5_read_range(s.offsets, first, count, out);
  offset_bytes_ += count * static_cast<int64_t>(sizeof(int64_t));
  ++reads_;
}

int64_t ProteinShards::read_offset(Shard& s, int64_t i) {
  int64_t v = 0;
  read_offsets(s, i, 1, &v);
  return v;
}

void ProteinShards::read_tokens(Shard& s, int64_t first, int64_t count, uint8_t* out) {
  if (count == 0) return;
  h5_read_range(s.tokens, first, count, out);
  for (int64_t i = 0; i < count; ++i) {
    PF_REQUIRE(DataError, out[i] < Vocab::kSize,
               "'" << s.data.path() << "' /" << split_ << "/tokens[" << first + i << "] = " << int{out[i]}
                   << " is not a token of the vocabulary (0-" << Vocab::kSize - 1 << ")");
    // <pad>, <end> and <mask> mean padding, a protein's end and a masked
    // position to the model: inside a protein they would be trained as such.
    PF_REQUIRE(DataError, out[i] >= Vocab::kUnk,
               "'" << s.data.path() << "' /" << split_ << "/tokens[" << first + i << "] = " << int{out[i]} << " is "
                   << Vocab::token_text(out[i]) << ", a control token, inside a protein (performer-data prepare "
                   << "writes residues only)");
  }
  token_bytes_ += count;
  ++reads_;
}

ProteinSpan ProteinShards::locate(int64_t p) {
  PF_REQUIRE(ValueError, p >= 0 && p < num_proteins_, "protein " << p << " outside [0, " << num_proteins_ << ")");
  const auto it = std::upper_bound(shards_.begin(), shards_.end(), p,
                                   [](int64_t v, const Shard& s) { return v < s.first_protein; });
  const int64_t si = (it - shards_.begin()) - 1;
  Shard& s = shards_[static_cast<size_t>(si)];
  int64_t off[2];
  read_offsets(s, p - s.first_protein, 2, off);
  PF_REQUIRE(DataError, off[1] >= off[0] && off[1] <= s.residues,
             "'" << s.data.path() << "': corrupt offsets [" << off[0] << ", " << off[1] << ") for sequence "
                 << p - s.first_protein);
  return ProteinSpan{si, off[0], off[1] - off[0]};
}

void ProteinShards::read_window(const ProteinSpan& span, int64_t begin, int64_t end, uint8_t* out) {
  Shard& s = shards_[static_cast<size_t>(span.shard)];
  const int64_t r0 = std::min(begin, span.length), r1 = std::min(end, span.length);
  read_tokens(s, span.first_token + r0, r1 - r0, out);
  for (int64_t x = std::max(begin, span.length); x < end; ++x)
    out[x - begin] = x == span.length ? Vocab::kEnd : Vocab::kPad;
}

// Largest local protein p >= lo with offsets[p] + p <= x (binary search by
// single-element reads; the chunk cache keeps the upper levels in memory).
int64_t ProteinShards::protein_at_stream(Shard& s, int64_t x, int64_t lo) {
  int64_t hi = s.proteins - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (read_offset(s, mid) + mid <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void ProteinShards::read_shard_stream(Shard& s, int64_t begin, int64_t end, uint8_t* out) {
  const int64_t p0 = protein_at_stream(s, begin, 0);
  // Offsets from p0 on, in blocks that double until they pass the last
  // position: the range the slice needs, without a second search.
  std::vector<int64_t> off;
  for (int64_t want = 16;; want *= 2) {
    const int64_t n = std::min(want, s.proteins + 1 - p0);
    off.resize(static_cast<size_t>(n));
    read_offsets(s, p0, n, off.data());
    if (p0 + n - 1 == s.proteins || off.back() + (p0 + n - 1) > end - 1) break;
  }
  auto start_of = [&](int64_t p) { return off[static_cast<size_t>(p - p0)] + p; };  // stream start of protein p
  auto len_of = [&](int64_t p) { return off[static_cast<size_t>(p - p0 + 1)] - off[static_cast<size_t>(p - p0)]; };
  // p1: the last protein starting at or before end - 1 (off holds its end too).
  const int64_t last = p0 + static_cast<int64_t>(off.size()) - 2;
  int64_t p1 = p0;
  while (p1 < last && start_of(p1 + 1) <= end - 1) ++p1;
  // Residues of the range are contiguous in `tokens`: one read.
  const int64_t t0 = off[0] + std::min(begin - start_of(p0), len_of(p0));
  const int64_t t1 = off[static_cast<size_t>(p1 - p0)] + std::min(end - start_of(p1), len_of(p1));
  std::vector<uint8_t> residues(static_cast<size_t>(t1 - t0));
  read_tokens(s, t0, t1 - t0, residues.data());
  int64_t r = 0;
  for (int64_t p = p0; p <= p1; ++p) {
    const int64_t a = std::max(begin, start_of(p)), b = std::min(end, start_of(p) + len_of(p) + 1);
    for (int64_t x = a; x < b; ++x) {
      const bool is_end = x - start_of(p) == len_of(p);
      out[x - begin] = is_end ? Vocab::kEnd : residues[static_cast<size_t>(r++)];
    }
  }
  PF_REQUIRE(DataError, r == t1 - t0,
             "'" << s.data.path() << "': inconsistent offsets around stream position " << begin);
}

void ProteinShards::read_stream(int64_t begin, int64_t end, uint8_t* out) {
  PF_REQUIRE(ValueError, begin >= 0 && end >= begin, "bad stream range [" << begin << ", " << end << ")");
  const int64_t total = stream_length();
  for (int64_t x = std::max(begin, total); x < end; ++x) out[x - begin] = Vocab::kPad;
  end = std::min(end, total);
  for (Shard& s : shards_) {
    const int64_t a = std::max(begin, s.stream_start), b = std::min(end, s.stream_start + s.stream_length());
    if (a >= b) continue;
    read_shard_stream(s, a - s.stream_start, b - s.stream_start, out + (a - begin));
  }
}

}  // namespace pf
