// Memory accounting per device: current and peak bytes, an optional cap, and
// the live allocations by tag. An allocation that would pass the cap throws a
// MemoryError naming the request, the current use, the cap and the largest
// live tags, so a run held to a 16 GiB (V100) budget fails with a plan, not a
// mystery.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace pf {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t cap_bytes = 0;  // 0 = no cap
  int64_t allocations = 0;  // live allocation count
};

class MemoryTracker {
 public:
  explicit MemoryTracker(Device device, int64_t cap_bytes = 0) : device_(device), cap_(cap_bytes) {}
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  Device device() const { return device_; }
  void set_cap(int64_t cap_bytes);
  // Records `bytes` under `tag`; throws MemoryError when the cap would be passed.
  void reserve(int64_t bytes, const std::string& tag);
  void release(int64_t bytes, const std::string& tag);
  MemoryStats stats() const;
  void reset_peak();
  // Live bytes per tag, largest first.
  std::vector<std::pair<std::string, int64_t>> live_by_tag() const;

 private:
  Device device_;
  mutable std::mutex mu_;
  int64_t cap_ = 0;
  int64_t current_ = 0;
  int64_t peak_ = 0;
  int64_t count_ = 0;
  std::map<std::string, int64_t> by_tag_;
};

// Raw allocation on a device, recorded in `tracker` (which must outlive it).
// Host memory is 64-byte aligned; CUDA memory comes from cudaMalloc.
void* device_allocate(MemoryTracker& tracker, int64_t bytes, const std::string& tag);
void device_free(MemoryTracker& tracker, void* ptr, int64_t bytes, const std::string& tag);

// Copies between any two places (host<->device, device<->device, host<->host).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes);
void fill_zero(void* dst, Device device, int64_t bytes);

// "1.50 GiB" style text.
std::string format_bytes(int64_t bytes);

}  // namespace pf
