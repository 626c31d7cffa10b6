// The per-rank data loader: see loader.h.
#include "data/loader.h"

#include <cstring>

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
  if (o.mode == SampleMode::Packed) {
    packed_ = std::make_unique<PackedSamples>(*shards_, o.sample_length, o.seed);
    samples_per_epoch_ = packed_->count();
  } else {
    samples_per_epoch_ = sample_count(*shards_, o.mode, o.sample_length);
  }
  const int64_t per_step = o.batch_size * o.dp_size;
  steps_per_epoch_ = (samples_per_epoch_ + per_step - 1) / per_step;
  start_worker();
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::sample_at(int64_t epoch, int64_t i) const {
  if (!options_.shuffle) return i;
  const KeyedPermutation perm(static_cast<uint64_t>(samples_per_epoch_),
                              mix64(mix64(options_.seed, 0x5A3Dull), static_cast<uint64_t>(epoch)));
  return static_cast<int64_t>(perm(static_cast<uint64_t>(i)));
}

LoaderPosition DataLoader::advance(LoaderPosition p) const {
  p.sample += options_.batch_size * options_.dp_size;
  if (p.sample >= samples_per_epoch_) {
    p.sample = 0;
    ++p.epoch;
  }
  return p;
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
  if (packed_) b.segments.resize(static_cast<size_t>(b.batch_size));
  for (int64_t row = 0; row < o.batch_size; ++row) {
    const int64_t i = p.sample + o.dp_rank * o.batch_size + row;
    if (i >= samples_per_epoch_) {  // padding row of the last step
      if (packed_) b.segments[static_cast<size_t>(row)] = {{0, b.global_offset, -1}};
      continue;
    }
    if (packed_) {
      b.samples[static_cast<size_t>(row)] = packed_->read_slice(
          *shards_, o.seed, p.epoch, sample_at(p.epoch, i), b.global_offset, b.global_offset + b.slice_length,
          b.tokens.data() + row * b.slice_length, &b.lookahead[static_cast<size_t>(row)],
          &b.segments[static_cast<size_t>(row)]);
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
  PF_REQUIRE(ValueError, position.epoch >= 0 && position.sample >= 0 && position.sample < samples_per_epoch_,
             "loader position (epoch " << position.epoch << ", sample " << position.sample
                                       << ") outside an epoch of " << samples_per_epoch_ << " samples");
  stop_worker();
  position_ = position;
  start_worker();
}

}  // namespace pf
