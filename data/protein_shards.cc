// Hyperslab reads of protein data shards: see protein_shards.h.
#include "data/protein_shards.h"

#include <algorithm>
#include <vector>

#include "data/schema.h"
#include "data/vocab.h"

namespace pf {

namespace {

// The stored type of a dataset: an integer of `bytes` bytes and `sign`, else a
// DataError naming the file, the dataset and what it holds (HDF5 would
// convert another type silently: -3 in int8 tokens would read as 253).
void require_integer_type(hid_t dset, const std::string& path, const std::string& name, size_t bytes,
                          H5T_sign_t sign) {
  H5Id type(H5Dget_type(dset));
  const bool integer = type.get() >= 0 && H5Tget_class(type.get()) == H5T_INTEGER;
  const size_t size = integer ? H5Tget_size(type.get()) : 0;
  const H5T_sign_t got = integer ? H5Tget_sign(type.get()) : H5T_SGN_ERROR;
  PF_REQUIRE(DataError, integer && size == bytes && got == sign,
             "'" << path << "' " << name << " holds "
                 << (integer ? std::string(got == H5T_SGN_NONE ? "unsigned " : "signed ") + std::to_string(8 * size) +
                                   "-bit integers"
                             : std::string("values that are not integers"))
                 << "; the schema stores " << (sign == H5T_SGN_NONE ? "unsigned " : "signed ") << 8 * bytes
                 << "-bit integers there");
}

constexpr int64_t kChunkCacheBytes = 8 << 20;  // per dataset: a few decompressed chunks
constexpr int64_t kCheckBlock = 1 << 16;       // offsets read per block by check_offsets (512 KiB)

// Every entry of a split's offsets [sequences + 1], streamed in blocks:
// offsets[0] = 0, each in [0, residues], increasing (no sequence is empty),
// the last = residues.
// Both sample modes rely on it: the concat stream locates proteins by a
// binary search over offsets and would read wrong samples without an error.
void check_offsets(hid_t offsets, const std::string& path, const std::string& split, int64_t sequences,
                   int64_t residues) {
  const std::string where = "'" + path + "' /" + split + "/offsets: ";
  std::vector<int64_t> block;
  int64_t prev = 0;
  for (int64_t first = 0; first <= sequences; first += kCheckBlock) {
    const int64_t n = std::min(kCheckBlock, sequences + 1 - first);
    block.resize(static_cast<size_t>(n));
    h5_read_range(offsets, first, n, block.data());
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = first + k, v = block[static_cast<size_t>(k)];
      PF_REQUIRE(
          DataError, v >= 0 && v <= residues,
          where << "offsets[" << i << "] = " << v << " is outside [0, " << residues << "] (the tokens of the split)");
      PF_REQUIRE(DataError, i > 0 || v == 0, where << "offsets[0] = " << v << ", expected 0");
      PF_REQUIRE(DataError, v >= prev,
                 where << "offsets[" << i << "] = " << v << " is below offsets[" << i - 1 << "] = " << prev
                       << " (offsets must be non-decreasing)");
      PF_REQUIRE(DataError, i == 0 || v > prev,
                 where << "offsets[" << i << "] = offsets[" << i - 1 << "] = " << v << ": sequence " << i - 1
                       << " is empty (performer-data prepare writes no empty sequence)");
      prev = v;
    }
  }
  PF_REQUIRE(
      DataError, prev == residues,
      where << "offsets[" << sequences << "] = " << prev << ", expected " << residues << " (the tokens of the split)");
}

}  // namespace

SplitExtent check_split(hid_t group, const std::string& path, const std::string& split) {
  H5Id tokens = h5_open_dataset(group, "tokens");
  H5Id offsets = h5_open_dataset(group, "offsets");
  SplitExtent e;
  e.sequences = h5_read_attr_int64(group, "sequences");
  e.residues = h5_read_attr_int64(group, "residues");
  const int64_t n_off = h5_dataset_length(offsets), n_tok = h5_dataset_length(tokens);
  PF_REQUIRE(DataError, e.sequences >= 0 && n_off == e.sequences + 1 && n_tok == e.residues,
             "'" << path << "' /" << split << ": offsets has " << n_off << " entries and tokens " << n_tok
                 << ", but the group records " << e.sequences << " sequences and " << e.residues
                 << " residues (expected offsets of length sequences+1)");
  // Each sequence holds a residue: a count beyond the residues is refused
  // before a block is read or anything per sequence is allocated.
  PF_REQUIRE(DataError, e.sequences <= e.residues,
             "'" << path << "' /" << split << ": the group records " << e.sequences << " sequences but only "
                 << e.residues << " residues (performer-data prepare writes no empty sequence)");
  // Declared and never written, they would read as fill values: an invented
  // protein of one repeated letter (concat mode trained on it, exit 0).
  h5_require_stored(tokens);
  h5_require_stored(offsets);
  check_offsets(offsets, path, split, e.sequences, e.residues);
  return e;
}

ProteinShards::ProteinShards(const std::vector<std::string>& paths, const std::string& split) : split_(split) {
  PF_REQUIRE(ValueError, !paths.empty(), "no data files given");
  PF_REQUIRE(ValueError, split == "train" || split == "valid" || split == "test" || split == kOodSplitName,
             "unknown split '" << split << "': expected train, valid, test or ood");
  shards_.reserve(paths.size());
  for (const std::string& path : paths) {
    Shard s;
    s.path = path;
    s.file = h5_open_file(path);
    check_schema(s.file, path);
    PF_REQUIRE(DataError, h5_exists(s.file, split), "'" << path << "' has no split '/" << split << "'");
    H5Id group = h5_open_group(s.file, split);
    s.tokens = h5_open_dataset(group, "tokens", kChunkCacheBytes);
    s.offsets = h5_open_dataset(group, "offsets", kChunkCacheBytes);
    require_integer_type(s.tokens, path, "/" + split + "/tokens", 1, H5T_SGN_NONE);
    require_integer_type(s.offsets, path, "/" + split + "/offsets", 8, H5T_SGN_2);
    const SplitExtent e = check_split(group, path, split);
    s.proteins = e.sequences;
    s.residues = e.residues;
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
  for (const Shard& s : shards_) files += (files.empty() ? "" : ", ") + s.path;
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
    for (int64_t first = 0; first < s.proteins; first += kCheckBlock) {
      const int64_t n = std::min(kCheckBlock, s.proteins - first) + 1;
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
               "'" << s.path << "' /" << split_ << "/tokens[" << first + i << "] = " << int{out[i]}
                   << " is not a token of the vocabulary (0-" << Vocab::kSize - 1 << ")");
    // <pad>, <end> and <mask> mean padding, a protein's end and a masked
    // position to the model: inside a protein they would be trained as such.
    PF_REQUIRE(DataError, out[i] >= Vocab::kUnk,
               "'" << s.path << "' /" << split_ << "/tokens[" << first + i << "] = " << int{out[i]} << " is "
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
             "'" << s.path << "': corrupt offsets [" << off[0] << ", " << off[1] << ") for sequence "
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
  PF_REQUIRE(DataError, r == t1 - t0, "'" << s.path << "': inconsistent offsets around stream position " << begin);
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
