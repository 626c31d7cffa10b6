// Random access to one split ("train", "valid" or "test") of one or several
// protein data files (schema in data/schema.h), read by HDF5 hyperslabs only:
// nothing is loaded whole. Proteins are numbered globally across shards in the
// order the files are given. Two views of the same tokens:
//   protein window: protein p as residues, then <end>, then <pad> forever;
//   stream:         all proteins, each followed by <end>, shards back to back;
//                   position x of protein p in shard s is
//                   stream_start(s) + offsets_s[p_local] + p_local + x.
// Every hyperslab read is counted (ReadCounters) so tests can prove that a
// rank reads only its slice. Not safe for concurrent use from two threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "data/h5.h"
#include "data/prepared_data.h"

namespace pf {

struct ReadCounters {
  int64_t token_bytes = 0;   // bytes selected from `tokens`
  int64_t offset_bytes = 0;  // bytes selected from `offsets`
  int64_t reads = 0;         // hyperslab reads
};

// Where protein p lives: its shard, first token index in that shard's tokens, length.
struct ProteinSpan {
  int64_t shard = 0, first_token = 0, length = 0;
};

class ProteinShards {
 public:
  // Opens every file with open_prepared_data (data/prepared_data.h: schema,
  // vocabulary, the splits' counts, types and shapes; DataError / Hdf5Error
  // naming the file) and the split with open_split, which reads every offset
  // once, in blocks, to check it (first 0, increasing, within the tokens,
  // last = residues): DataError naming the file, the dataset, the first bad
  // index and the values. The reads at opening are not counted in counters().
  ProteinShards(const std::vector<std::string>& paths, const std::string& split);

  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }
  int64_t num_proteins() const { return num_proteins_; }
  int64_t num_residues() const { return num_residues_; }
  int64_t stream_length() const { return num_residues_ + num_proteins_; }
  const std::string& shard_path(int64_t s) const { return shards_[static_cast<size_t>(s)].data.path(); }
  // The checked handle of shard s's file (its cluster table, attributes).
  const PreparedData& shard_file(int64_t s) const { return shards_[static_cast<size_t>(s)].data; }
  // "a.h5, b.h5": the files, for messages.
  std::string file_list() const;
  const std::string& split() const { return split_; }

  // Reads offsets[p], offsets[p+1] of protein p's shard (16 bytes).
  ProteinSpan locate(int64_t p);
  // Residues of every protein, in order: the offsets read in blocks (not
  // counted in counters(), like the reads at opening).
  std::vector<int64_t> protein_lengths();
  // Tokens [begin, end) of the window view of a located protein into out[end - begin].
  void read_window(const ProteinSpan& span, int64_t begin, int64_t end, uint8_t* out);
  // Tokens [begin, end) of the stream into out[end - begin]; <pad> past the end.
  void read_stream(int64_t begin, int64_t end, uint8_t* out);

  ReadCounters counters() const;
  void reset_counters();

 private:
  struct Shard {
    PreparedData data;  // before the datasets: closed after them
    H5Id tokens, offsets;
    int64_t proteins = 0, residues = 0;
    int64_t first_protein = 0, stream_start = 0;
    int64_t stream_length() const { return residues + proteins; }
  };
  int64_t read_offset(Shard& s, int64_t i);
  void read_offsets(Shard& s, int64_t first, int64_t count, int64_t* out);
  void read_tokens(Shard& s, int64_t first, int64_t count, uint8_t* out);
  int64_t protein_at_stream(Shard& s, int64_t x, int64_t lo);  // local protein holding local stream position x
  void read_shard_stream(Shard& s, int64_t begin, int64_t end, uint8_t* out);

  std::vector<Shard> shards_;
  std::string split_;
  int64_t num_proteins_ = 0, num_residues_ = 0;
  std::atomic<int64_t> token_bytes_{0}, offset_bytes_{0}, reads_{0};
};

}  // namespace pf
