// Host memory for large tensors, kept for reuse but bounded.
//
// A training step allocates and releases the same buffer sizes every step.
// Each block of at least kHostPoolMinBytes is a mapping of its own (whole
// pages); a released block stays mapped in the pool and the next request of
// its size (or up to an eighth less) takes it back without page faults or
// zeroing. The pool never holds more than `bound` bytes in all, in use and
// kept together, beyond each block's rounding to whole pages: before it
// maps a new block it unmaps kept blocks, those kept longest first, until
// the new block fits under the bound (or nothing is kept). The tracker passes the high-water mark of its tracked bytes
// as the bound, so the process's tensor memory stays at the tracked peak rather than growing with the fragmentation of
// a general-purpose heap. Thread safe; smaller blocks are for the caller to take from the C library.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace pf {

inline constexpr int64_t kHostPoolMinBytes = int64_t{256} << 10;

class HostPool {
 public:
  HostPool() = default;
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool();  // unmaps every block; the blocks still in use must be gone

  // A block of at least `bytes` (>= kHostPoolMinBytes), page aligned. Throws
  // MemoryError when the system has no memory for it.
  void* take(int64_t bytes, int64_t bound);
  // Returns a block `take` gave.
  void give(void* ptr);

  struct Stats {
    int64_t in_use_bytes = 0;  // mapped bytes of the blocks given out
    int64_t kept_bytes = 0;    // mapped bytes kept for reuse
    int64_t maps = 0;          // mappings made so far
    int64_t reuses = 0;        // requests served by a kept block
  };
  Stats stats() const;

 private:
  struct Block {
    void* ptr;
    int64_t bytes;  // mapped (whole pages)
  };
  void unmap(const Block& b);

  mutable std::mutex mu_;
  std::vector<Block> kept_;                    // in the order they were given back
  std::unordered_map<void*, int64_t> in_use_;  // pointer -> mapped bytes
  Stats stats_;
};

}  // namespace pf
