// The per-rank data loader: see loader.h.
#include "data/loader.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "data/family_contexts.h"
#include "data/h5.h"
#include "data/permutation.h"
#include "data/vocab.h"

namespace pf {

DataLoader::DataLoader(LoaderOptions options) : options_(std::move(options)) {
  const LoaderOptions& o = options_;
  PF_REQUIRE(ValueError, o.sample_length > 0 && o.sp_size > 0 && o.sample_length % o.sp_size == 0,
             "sample length " << o.sample_length << " is not divisible by the sequence-parallel size " << o.sp_size);
  PF_REQUIRE(ValueError, o.sp_rank >= 0 && o.sp_rank < o.sp_size,
             "sequence-parallel rank " << o.sp_rank << " outside [0, " << o.sp_size << ")");
  PF_REQUIRE(ValueError, o.dp_size > 0 && o.dp_rank >= 0 && o.dp_rank < o.dp_size,
             "data-parallel rank " << o.dp_rank << " outside [0, " << o.dp_size << ")");
  PF_REQUIRE(ValueError, o.batch_size > 0, "batch size must be positive, got " << o.batch_size);
  PF_REQUIRE(ValueError, o.prefetch >= 0, "prefetch must be >= 0, got " << o.prefetch);
  // Reading ahead touches HDF5 from a second thread: only safe with a
  // thread-safe HDF5 build. Without one the loader reads inside next(); the
  // batches are the same, only the overlap with compute is lost.
  hbool_t threadsafe = 0;
  if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe) options_.prefetch = 0;
  shards_ = std::make_unique<ProteinShards>(o.files, o.split);
  if (o.sampling == Sampling::Cluster || o.mode == SampleMode::Family) {
    PF_REQUIRE(DataError, shards_->num_proteins() > 0,
               "split '" << o.split << "' of " << shards_->file_list() << " holds no protein to sample "
                         << (o.mode == SampleMode::Family ? "families" : "clusters") << " from");
    clusters_ = std::make_unique<SplitClusters>(
        *shards_, o.mode == SampleMode::Family ? "data.mode = \"family\" (families are the file's clusters)"
                                               : "data.sampling = \"cluster\"");
    PF_REQUIRE(DataError, clusters_->proteins() == shards_->num_proteins() && clusters_->count() > 0,
               "split '" << o.split << "' of " << shards_->file_list() << ": " << clusters_->count()
                         << " clusters over " << clusters_->proteins() << " proteins, but the split holds "
                         << shards_->num_proteins() << " proteins");
    if (o.mode != SampleMode::Single) {
      std::vector<int64_t> tokens = shards_->protein_lengths();
      for (int64_t& t : tokens) t += 1;  // its <end>
      tokens_ = std::make_shared<const std::vector<int64_t>>(std::move(tokens));
    }
    cluster_epoch(0);  // a split too short for one sample fails here, not in the reading thread
  } else if (o.mode == SampleMode::Packed) {
    packed_ = std::make_unique<PackedSamples>(*shards_, o.sample_length, o.seed);
    tokens_ = packed_->tokens();
    samples_per_epoch_ = packed_->count();
  } else {
    samples_per_epoch_ = sample_count(*shards_, o.mode, o.sample_length);
  }
  start_worker();
}

DataLoader::~DataLoader() { stop_worker(); }

std::shared_ptr<const DataLoader::ClusterEpoch> DataLoader::cluster_epoch(int64_t epoch) const {
  const LoaderOptions& o = options_;
  std::lock_guard<std::mutex> lock(epochs_mutex_);
  if (auto it = epochs_.find(epoch); it != epochs_.end()) return it->second;
  auto e = std::make_shared<ClusterEpoch>();
  if (o.mode == SampleMode::Family) {
    const std::vector<std::vector<int64_t>> contexts =
        family_contexts(*clusters_, *tokens_, o.sample_length, o.seed, epoch, o.sampling);
    for (const std::vector<int64_t>& c : contexts) e->proteins.insert(e->proteins.end(), c.begin(), c.end());
    e->packed = std::make_unique<PackedSamples>(tokens_, contexts, o.sample_length, o.seed, epoch);
    e->samples = e->packed->count();
  } else if (e->proteins = clusters_->drawn_proteins(o.seed, epoch); o.mode == SampleMode::Single) {
    e->samples = static_cast<int64_t>(e->proteins.size());
  } else if (o.mode == SampleMode::Concat) {
    e->stream_starts.reserve(e->proteins.size() + 1);
    e->stream_starts.push_back(0);
    for (int64_t p : e->proteins)
      e->stream_starts.push_back(e->stream_starts.back() + (*tokens_)[static_cast<size_t>(p)]);
    e->samples = e->stream_starts.back() / o.sample_length;
    PF_REQUIRE(DataError, e->samples >= 1,
               "dataset shorter than one sample: epoch "
                   << epoch << " draws " << e->proteins.size() << " proteins (one per cluster) of "
                   << e->stream_starts.back() << " stream tokens, sample length " << o.sample_length
                   << " (concat mode, cluster sampling) in " << shards_->file_list());
  } else {
    e->packed = std::make_unique<PackedSamples>(tokens_, e->proteins, o.sample_length, o.seed, epoch);
    e->samples = e->packed->count();
  }
  // Keep the three epochs nearest to this one: the main thread's and the
  // read-ahead thread's are at most one apart.
  epochs_[epoch] = e;
  while (epochs_.size() > 3) {
    if (epochs_.begin()->first < epoch)
      epochs_.erase(epochs_.begin());
    else
      epochs_.erase(std::prev(epochs_.end()));
  }
  return e;
}

std::vector<int64_t> DataLoader::drawn_proteins(int64_t epoch) const {
  PF_REQUIRE(ValueError, clusters_ != nullptr, "drawn_proteins: the loader samples by sequence");
  return cluster_epoch(epoch)->proteins;
}

int64_t DataLoader::protein_tokens(int64_t p) const {
  if (tokens_) return tokens_->at(static_cast<size_t>(p));
  return shards_->locate(p).length + 1;
}

int64_t DataLoader::samples_in_epoch(int64_t epoch) const {
  return clusters_ ? cluster_epoch(epoch)->samples : samples_per_epoch_;
}

int64_t DataLoader::steps_per_epoch() const {
  const int64_t per_step = options_.batch_size * options_.dp_size;
  return (samples_per_epoch() + per_step - 1) / per_step;
}

int64_t DataLoader::sample_at(int64_t epoch, int64_t i) const {
  if (!options_.shuffle) return i;
  const KeyedPermutation perm(static_cast<uint64_t>(samples_in_epoch(epoch)),
                              mix64(mix64(options_.seed, 0x5A3Dull), static_cast<uint64_t>(epoch)));
  return static_cast<int64_t>(perm(static_cast<uint64_t>(i)));
}

LoaderPosition DataLoader::advance(LoaderPosition p) const {
  p.sample += options_.batch_size * options_.dp_size;
  if (p.sample >= samples_in_epoch(p.epoch)) {
    p.sample = 0;
    ++p.epoch;
  }
  return p;
}

SampleInfo DataLoader::read_cluster_slice(const ClusterEpoch& e, int64_t epoch, int64_t sample, int64_t row, Batch& b) {
  const LoaderOptions& o = options_;
  const int64_t begin = b.global_offset, end = begin + b.slice_length;
  uint8_t* out = b.tokens.data() + row * b.slice_length;
  uint8_t* lookahead = &b.lookahead[static_cast<size_t>(row)];
  if (packs_proteins(o.mode))
    return e.packed->read_slice(*shards_, o.seed, epoch, sample, begin, end, out, lookahead,
                                &b.segments[static_cast<size_t>(row)], o.members_alone);
  if (o.mode == SampleMode::Single) {
    SampleInfo info = read_sample_slice(*shards_, SampleMode::Single, o.sample_length, o.seed, epoch,
                                        e.proteins[static_cast<size_t>(sample)], begin, end, out, lookahead);
    info.sample = sample;
    return info;
  }
  // Concat: epoch-stream positions [sample L + begin, sample L + end], the
  // last one the lookahead (<pad> past the stream's end).
  const int64_t first = sample * o.sample_length + begin, last = sample * o.sample_length + end + 1;
  std::vector<uint8_t> buf(static_cast<size_t>(last - first), Vocab::kPad);
  const std::vector<int64_t>& starts = e.stream_starts;
  size_t k = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), first) - starts.begin()) - 1;
  for (; k + 1 < starts.size() && starts[k] < last; ++k) {
    const int64_t lo = std::max(first, starts[k]), hi = std::min(last, starts[k + 1]);
    if (lo >= hi) continue;
    const ProteinSpan span = shards_->locate(e.proteins[k]);
    shards_->read_window(span, lo - starts[k], hi - starts[k], buf.data() + (lo - first));
  }
  std::memcpy(out, buf.data(), static_cast<size_t>(b.slice_length));
  *lookahead = buf.back();
  SampleInfo info;
  info.sample = sample;
  info.valid = true;
  info.source_start = sample * o.sample_length;
  info.source_length = o.sample_length;
  return info;
}

Batch DataLoader::read_batch(LoaderPosition p) {
  const LoaderOptions& o = options_;
  Batch b;
  b.position = p;
  b.batch_size = o.batch_size;
  b.slice_length = o.sample_length / o.sp_size;
  b.global_offset = o.sp_rank * b.slice_length;
  b.tokens.assign(static_cast<size_t>(b.batch_size * b.slice_length), Vocab::kPad);
  b.lookahead.assign(static_cast<size_t>(b.batch_size), Vocab::kPad);
  b.samples.resize(static_cast<size_t>(b.batch_size));
  const bool packed = packs_proteins(o.mode);
  if (packed) b.segments.resize(static_cast<size_t>(b.batch_size));
  const std::shared_ptr<const ClusterEpoch> epoch = clusters_ ? cluster_epoch(p.epoch) : nullptr;
  const int64_t samples = samples_in_epoch(p.epoch);
  for (int64_t row = 0; row < o.batch_size; ++row) {
    const int64_t i = p.sample + o.dp_rank * o.batch_size + row;
    if (i >= samples) {  // padding row of the last step
      if (packed) b.segments[static_cast<size_t>(row)] = {{0, b.global_offset, -1}};
      continue;
    }
    if (epoch) {
      b.samples[static_cast<size_t>(row)] = read_cluster_slice(*epoch, p.epoch, sample_at(p.epoch, i), row, b);
      continue;
    }
    if (packed_) {
      b.samples[static_cast<size_t>(row)] =
          packed_->read_slice(*shards_, o.seed, p.epoch, sample_at(p.epoch, i), b.global_offset,
                              b.global_offset + b.slice_length, b.tokens.data() + row * b.slice_length,
                              &b.lookahead[static_cast<size_t>(row)], &b.segments[static_cast<size_t>(row)]);
      continue;
    }
    b.samples[static_cast<size_t>(row)] =
        read_sample_slice(*shards_, o.mode, o.sample_length, o.seed, p.epoch, sample_at(p.epoch, i), b.global_offset,
                          b.global_offset + b.slice_length, b.tokens.data() + row * b.slice_length,
                          &b.lookahead[static_cast<size_t>(row)]);
  }
  return b;
}

void DataLoader::worker_loop(LoaderPosition p) {
  h5_quiet();  // HDF5's error printing is per thread
  for (;;) {
    Item item;
    try {
      item.batch = read_batch(p);
    } catch (...) {
      item.error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < options_.prefetch; });
    if (stop_) return;
    const bool failed = static_cast<bool>(item.error);
    queue_.push_back(std::move(item));
    cv_.notify_all();
    if (failed) return;
    p = advance(p);
  }
}

void DataLoader::start_worker() {
  if (options_.prefetch == 0) return;
  stop_ = false;
  queue_.clear();
  worker_ = std::thread([this, p = position_] { worker_loop(p); });
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  queue_.clear();
}

Batch DataLoader::next() {
  if (options_.prefetch == 0) {
    Batch b = read_batch(position_);
    position_ = advance(position_);
    return b;
  }
  Item item;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    item = std::move(queue_.front());
    queue_.pop_front();
  }
  cv_.notify_all();
  if (item.error) {
    // Keep the failed item at the front so every later next() reports it too.
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_front(Item{Batch{}, item.error});
    std::rethrow_exception(item.error);
  }
  position_ = advance(position_);
  return std::move(item.batch);
}

void DataLoader::set_position(LoaderPosition position) {
  PF_REQUIRE(ValueError, position.epoch >= 0, "loader position: negative epoch " << position.epoch);
  const int64_t samples = samples_in_epoch(position.epoch);
  PF_REQUIRE(ValueError, position.sample >= 0 && position.sample < samples,
             "loader position (epoch " << position.epoch << ", sample " << position.sample << ") outside an epoch of "
                                       << samples << " samples");
  stop_worker();
  position_ = position;
  start_worker();
}

}  // namespace pf
