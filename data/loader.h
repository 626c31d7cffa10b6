// The training data loader of one rank (dp, sp) in a dp x sp grid.
//   Batch.tokens     [batch_size, L / sp_size] uint8: positions
//                    [sp_rank L / SP, (sp_rank + 1) L / SP) of each sample
//   Batch.lookahead  [batch_size]: the token at position (sp_rank + 1) L / SP of
//                    each sample (see data/sample.h): the next-token target of
//                    the slice's last position
//   Batch.samples    [batch_size] per-sample metadata
//   Batch.segments   packed mode: [batch_size] the runs of the slice that
//                    hold one protein each (data/packed_samples.h); empty in
//                    the other modes
// Epoch order: position i of epoch e holds sample perm_e(i), perm_e a keyed
// permutation of (seed, epoch) (identity with shuffle off), the same on every
// rank. A step starting at epoch position i0 gives data-parallel rank d the
// positions i0 + d B + b, b in [0, B), and the next step starts at
// i0 + B DP: groups are disjoint and together cover the epoch; rows past the
// end of the epoch (last step only) are padding rows (valid = false, all
// <pad>). Ranks of one sequence group get the same samples.
// A background thread reads up to `prefetch` batches ahead (bounded queue);
// its exceptions are rethrown by next() (and by every later call). It needs a
// thread-safe HDF5 build (Debian's is); otherwise reads happen inside next().
// position() / set_position() save and restore (epoch, sample): a restored
// loader yields exactly the batches the original would have yielded from there
// (and, after a change of batch size or dp size, continues from the first
// sample of the epoch order that no rank has consumed).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/protein_shards.h"
#include "data/packed_samples.h"
#include "data/sample.h"

namespace pf {

struct LoaderOptions {
  std::vector<std::string> files;  // shards of schema performer-protein-v1
  std::string split = "train";
  SampleMode mode = SampleMode::Concat;
  int64_t sample_length = 8192;  // L, divisible by sp_size
  int64_t batch_size = 1;        // samples per step per data-parallel group
  int64_t dp_size = 1, dp_rank = 0, sp_size = 1, sp_rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t prefetch = 2;  // batches read ahead by a background thread; 0 = read inside next()
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t sample = 0;  // epoch-order position of the first sample of the next step (over all dp groups)
  bool operator==(const LoaderPosition& o) const { return epoch == o.epoch && sample == o.sample; }
  bool operator!=(const LoaderPosition& o) const { return !(*this == o); }
};

struct Batch {
  LoaderPosition position;    // of this batch
  int64_t batch_size = 0;     // rows
  int64_t slice_length = 0;   // L / sp_size
  int64_t global_offset = 0;  // sample position of tokens[:, 0] = sp_rank L / sp_size
  std::vector<uint8_t> tokens;     // [batch_size, slice_length]
  std::vector<uint8_t> lookahead;  // [batch_size]
  std::vector<SampleInfo> samples;  // [batch_size]
  std::vector<std::vector<SliceSegment>> segments;  // packed: [batch_size]; empty otherwise
  std::vector<int32_t> tokens_int32() const { return std::vector<int32_t>(tokens.begin(), tokens.end()); }
};

class DataLoader {
 public:
  // Opens the shards and starts the read-ahead thread. ValueError for a bad
  // grid (L not divisible by sp_size, ranks out of range), DataError /
  // Hdf5Error for bad files or a dataset shorter than one sample.
  explicit DataLoader(LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  Batch next();                      // the batch at position(), then advances
  LoaderPosition position() const { return position_; }
  void set_position(LoaderPosition position);

  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }  // from the start of an epoch
  const LoaderOptions& options() const { return options_; }
  // Bytes this loader has read from the shards (all batches read so far,
  // including read-ahead).
  ReadCounters read_counters() const { return shards_->counters(); }
  // Sample at position i of epoch `epoch` (the keyed permutation).
  int64_t sample_at(int64_t epoch, int64_t i) const;
  // Packed mode: the plan (nullptr in the other modes).
  const PackedSamples* packed() const { return packed_.get(); }

 private:
  Batch read_batch(LoaderPosition p);
  LoaderPosition advance(LoaderPosition p) const;
  void start_worker();
  void stop_worker();
  void worker_loop(LoaderPosition p);

  LoaderOptions options_;
  std::unique_ptr<ProteinShards> shards_;
  std::unique_ptr<PackedSamples> packed_;  // packed mode
  int64_t samples_per_epoch_ = 0, steps_per_epoch_ = 0;
  LoaderPosition position_;

  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
};

}  // namespace pf
