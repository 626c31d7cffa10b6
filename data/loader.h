// The training data loader of one rank (dp, sp) in a dp x sp grid.
//   Batch.tokens     [batch_size, L / sp_size] uint8: positions
//                    [sp_rank L / SP, (sp_rank + 1) L / SP) of each sample
//   Batch.lookahead  [batch_size]: the token at position (sp_rank + 1) L / SP of
//                    each sample (see data/sample.h): the next-token target of
//                    the slice's last position
//   Batch.samples    [batch_size] per-sample metadata
//   Batch.segments   packed and family modes: [batch_size] the runs of the
//                    slice that hold one protein each (data/packed_samples.h);
//                    empty in the other modes
// Epoch order: position i of epoch e holds sample perm_e(i), perm_e a keyed
// permutation of (seed, epoch) (identity with shuffle off), the same on every
// rank. With sampling = Cluster (data/cluster_sampling.h) the samples of
// epoch e are made from one member drawn per cluster for that epoch: as many
// samples as clusters (single), or a number that may differ between epochs
// (concat, packed): samples_in_epoch(e). Family mode (data/family_contexts.h)
// makes each epoch's samples from the split's families (the file's clusters):
// every context of every family with sequence sampling, the first context of
// each with cluster sampling; its sample count may differ between epochs. A step starting at epoch position i0 gives data-parallel rank d the
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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/cluster_sampling.h"
#include "data/packed_samples.h"
#include "data/protein_shards.h"
#include "data/sample.h"

namespace pf {

struct LoaderOptions {
  std::vector<std::string> files;  // shards of schema performer-protein-v1 or -v2
  std::string split = "train";
  SampleMode mode = SampleMode::Concat;
  Sampling sampling = Sampling::Sequence;  // Cluster (and mode Family): cluster-split files only
  int64_t sample_length = 8192;            // L, divisible by sp_size
  int64_t batch_size = 1;                  // samples per step per data-parallel group
  int64_t dp_size = 1, dp_rank = 0, sp_size = 1, sp_rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t prefetch = 2;  // batches read ahead by a background thread; 0 = read inside next()
  // Family mode: the same samples with every member on its own (PackedSamples::read_slice).
  bool members_alone = false;
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t sample = 0;  // epoch-order position of the first sample of the next step (over all dp groups)
  bool operator==(const LoaderPosition& o) const { return epoch == o.epoch && sample == o.sample; }
  bool operator!=(const LoaderPosition& o) const { return !(*this == o); }
};

struct Batch {
  LoaderPosition position;                          // of this batch
  int64_t batch_size = 0;                           // rows
  int64_t slice_length = 0;                         // L / sp_size
  int64_t global_offset = 0;                        // sample position of tokens[:, 0] = sp_rank L / sp_size
  std::vector<uint8_t> tokens;                      // [batch_size, slice_length]
  std::vector<uint8_t> lookahead;                   // [batch_size]
  std::vector<SampleInfo> samples;                  // [batch_size]
  std::vector<std::vector<SliceSegment>> segments;  // packed, family: [batch_size]; empty otherwise
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

  Batch next();  // the batch at position(), then advances
  LoaderPosition position() const { return position_; }
  void set_position(LoaderPosition position);

  // Samples of epoch `epoch`: the same for every epoch except with cluster
  // sampling in concat and packed modes.
  int64_t samples_in_epoch(int64_t epoch) const;
  // Those of the epoch of position(), and its steps from its start.
  int64_t samples_per_epoch() const { return samples_in_epoch(position_.epoch); }
  int64_t steps_per_epoch() const;
  const LoaderOptions& options() const { return options_; }
  // Bytes this loader has read from the shards (all batches read so far,
  // including read-ahead).
  ReadCounters read_counters() const { return shards_->counters(); }
  // Sample at position i of epoch `epoch` (the keyed permutation).
  int64_t sample_at(int64_t epoch, int64_t i) const;
  // Packed mode with sequence sampling: the plan (nullptr otherwise).
  const PackedSamples* packed() const { return packed_.get(); }
  // Cluster sampling or family mode: the split's clusters (nullptr otherwise).
  const SplitClusters* clusters() const { return clusters_.get(); }
  // Cluster sampling: the protein drawn for each cluster in epoch `epoch`;
  // family mode: the proteins of epoch `epoch`'s contexts, context by context.
  std::vector<int64_t> drawn_proteins(int64_t epoch) const;
  // Tokens (residues + 1) of protein p of the split.
  int64_t protein_tokens(int64_t p) const;

 private:
  Batch read_batch(LoaderPosition p);
  LoaderPosition advance(LoaderPosition p) const;
  void start_worker();
  void stop_worker();
  void worker_loop(LoaderPosition p);

  // Cluster sampling or family mode: what epoch e is made of.
  struct ClusterEpoch {
    std::vector<int64_t> proteins;          // drawn for each cluster, in cluster order (family: every context's)
    std::vector<int64_t> stream_starts;     // concat: [clusters + 1] epoch-stream position of each protein
    std::unique_ptr<PackedSamples> packed;  // packed, family: the epoch's plan
    int64_t samples = 0;
  };
  // Built on first use and kept for the few latest epochs (both threads ask).
  std::shared_ptr<const ClusterEpoch> cluster_epoch(int64_t epoch) const;
  SampleInfo read_cluster_slice(const ClusterEpoch& e, int64_t epoch, int64_t sample, int64_t row, Batch& b);

  LoaderOptions options_;
  std::unique_ptr<ProteinShards> shards_;
  std::unique_ptr<PackedSamples> packed_;               // packed mode, sequence sampling
  std::unique_ptr<SplitClusters> clusters_;             // cluster sampling, family mode
  std::shared_ptr<const std::vector<int64_t>> tokens_;  // not in single mode: residues + 1 per protein
  mutable std::mutex epochs_mutex_;
  mutable std::map<int64_t, std::shared_ptr<const ClusterEpoch>> epochs_;
  int64_t samples_per_epoch_ = 0;  // sequence sampling
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
