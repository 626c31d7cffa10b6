// Memory accounting per device: current and peak bytes, an optional cap, and
// the live allocations by tag. An allocation that would pass the cap throws a
// MemoryError naming the request, the current use, the cap and the largest
// live tags, so a run held to a 16 GiB (V100) budget fails with a plan, not a
// mystery.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "runtime/host_pool.h"

namespace pf {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t cap_bytes = 0;  // 0 = no cap
  int64_t allocations = 0;  // live allocation count
};

class MemoryTracker {
 public:
  explicit MemoryTracker(Device device, int64_t cap_bytes = 0);
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  Device device() const { return device_; }
  // The stream on which this device's tensors are allocated and released in
  // stream order (the owner's compute stream; ExecResources sets it and clears
  // it before destroying the stream). Default: a synchronous stream.
  void set_stream(const Stream& stream);
  Stream stream() const;
  void set_cap(int64_t cap_bytes);
  // Records `bytes` under `tag`; throws MemoryError when the cap would be passed.
  void reserve(int64_t bytes, const std::string& tag);
  void release(int64_t bytes, const std::string& tag);
  MemoryStats stats() const;
  void reset_peak();
  // The most bytes ever tracked at once (reset_peak does not lower it).
  int64_t high_water_bytes() const;
  // Where a CPU tracker's large blocks come from (device_allocate), bounded
  // by high_water_bytes(); shared with the releases still queued on streams,
  // so it outlives the tracker until they have run. ValueError on CUDA.
  std::shared_ptr<HostPool> host_pool() const;
  // Live bytes per tag, largest first.
  std::vector<std::pair<std::string, int64_t>> live_by_tag() const;

 private:
  Device device_;
  mutable std::mutex mu_;
  Stream stream_;
  int64_t cap_ = 0;
  int64_t current_ = 0;
  int64_t peak_ = 0;
  int64_t high_ = 0;
  int64_t count_ = 0;
  std::shared_ptr<HostPool> pool_;  // CPU trackers only
  std::map<std::string, int64_t> by_tag_;
};

// Raw allocation on a device, recorded in `tracker` (which must outlive it).
// Stream ordered, as cudaMallocAsync / cudaFreeAsync: the memory may be used by
// work on the tracker's stream (and, after an event, on other streams); the
// release is queued on `stream` (the tracker's when null), so work already
// queued there still sees the memory. The tracker counts it as free at once.
// Host memory is 64-byte aligned (blocks of kHostPoolMinBytes or more: whole
// pages from the tracker's host pool, runtime/host_pool.h); CUDA memory comes
// from the device's pool.
void* device_allocate(MemoryTracker& tracker, int64_t bytes, const std::string& tag);
void device_free(MemoryTracker& tracker, void* ptr, int64_t bytes, const std::string& tag,
                 const Stream* stream = nullptr);

// Copies between any two places (host<->device, device<->device, host<->host)
// and clears, in the order of `stream` (queued on asynchronous streams: the
// host may read `dst` only after synchronize(stream)).
void copy_bytes(const Stream& stream, void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes);
void fill_zero(const Stream& stream, void* dst, Device device, int64_t bytes);
// `rows` runs of `row_bytes` each, the run r at src + r * src_pitch to
// dst + r * dst_pitch, within `device`'s memory (one 2-D copy on CUDA).
void copy_rows(const Stream& stream, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
               int64_t row_bytes, int64_t rows, Device device);

// For tools and tests: waits until the device is idle (every stream), then
// copies or clears and returns with the bytes in place. On the CPU it copies
// at once: the caller synchronises the stream that wrote the source first.
void copy_bytes_blocking(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes);
void fill_zero_blocking(void* dst, Device device, int64_t bytes);

// The high-water mark of the bytes in use in the device's memory pool in this
// process (cudaMemPoolAttrUsedMemHigh of the default pool, which every
// device_allocate draws from): what the allocator really handed out, with
// any rounding and whatever else took memory from the pool, as a check of the
// tracker's peak. Since the process started or the last call with reset.
// -1 on the CPU, which has no pool.
int64_t device_pool_used_high(Device device, bool reset = false);

// "1.50 GiB" style text.
std::string format_bytes(int64_t bytes);

// The host's physical memory in bytes (sysconf), 0 when it cannot be read.
int64_t host_memory_bytes();

}  // namespace pf
