// Host memory for large tensors, kept for reuse but bounded.
//
// A training step allocates and releases the same buffer sizes every step.
// Each block of at least kHostPoolMinBytes is a mapping of its own (whole
// pages); a released block stays mapped in the pool and the next request of
// the same number of pages takes it back without page faults or zeroing.
// The pool maps a new block only after unmapping kept blocks, those kept
// longest first, until the blocks in use, the kept ones and the new one fit
// under `bound` plus a page per block (or nothing is kept). The tracker
// passes the high-water mark of its tracked bytes as the bound, and every
// block in use is a tracked tensor, so the pool's mapped bytes stay at the
// tracked peak (plus pages) rather than growing with the fragmentation of a
// general-purpose heap. On an asynchronous stream a block is retired when
// its tensor is released (the tracker counts it free then) and given back
// when the stream reaches that point; until then it is mapped, counted
// neither in use nor kept, and comes on top of the bound. Thread safe.
// Smaller blocks are for the caller to take from the C library.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace pf {

inline constexpr int64_t kHostPoolMinBytes = int64_t{256} << 10;
// Whether a host block of `bytes` is the pool's (else the C library's).
inline bool host_pool_takes(int64_t bytes) { return bytes >= kHostPoolMinBytes; }

class HostPool {
 public:
  HostPool() = default;
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool();  // unmaps the kept blocks; those still in use stay mapped

  // A block of at least `bytes` (>= kHostPoolMinBytes), page aligned. Throws
  // MemoryError when the system has no memory for it.
  void* take(int64_t bytes, int64_t bound);
  // Marks a block `take` gave as released by its owner, its give() to come.
  void retire(void* ptr);
  // Returns a block `take` gave (retired or not) for reuse.
  void give(void* ptr);

  struct Stats {
    int64_t in_use_bytes = 0;   // mapped bytes of the blocks given out
    int64_t retired_bytes = 0;  // mapped bytes retired, not yet given back
    int64_t kept_bytes = 0;     // mapped bytes kept for reuse
    int64_t maps = 0;           // mappings made so far
    int64_t reuses = 0;         // requests served by a kept block
  };
  Stats stats() const;

 private:
  struct Block {
    void* ptr;
    int64_t bytes;  // mapped (whole pages)
  };
  void unmap(const Block& b);

  mutable std::mutex mu_;
  std::vector<Block> kept_;                     // in the order they were given back
  std::unordered_map<void*, int64_t> in_use_;   // pointer -> mapped bytes
  std::unordered_map<void*, int64_t> retired_;  // pointer -> mapped bytes
  Stats stats_;
};

}  // namespace pf
