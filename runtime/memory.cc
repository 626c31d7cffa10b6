#include "runtime/memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/check.h"

namespace pf {

// Defined in memory_cuda.cu or memory_nocuda.cc.
void* cuda_raw_allocate(Device device, int64_t bytes);
void cuda_raw_free(Device device, void* ptr);
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes);
void cuda_fill_zero(void* dst, Device device, int64_t bytes);

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void MemoryTracker::set_cap(int64_t cap_bytes) {
  PF_REQUIRE(ValueError, cap_bytes >= 0, "memory cap must be >= 0, got " << cap_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  cap_ = cap_bytes;
}

void MemoryTracker::reserve(int64_t bytes, const std::string& tag) {
  PF_REQUIRE(ValueError, bytes >= 0, "allocation of " << bytes << " bytes for '" << tag << "'");
  std::lock_guard<std::mutex> lock(mu_);
  if (cap_ > 0 && current_ + bytes > cap_) {
    std::ostringstream os;
    os << "allocation of " << format_bytes(bytes) << " for '" << tag << "' on " << device_.str()
       << " would exceed the cap: in use " << format_bytes(current_) << ", cap " << format_bytes(cap_)
       << ", peak " << format_bytes(peak_) << "; largest live:";
    std::vector<std::pair<std::string, int64_t>> tags(by_tag_.begin(), by_tag_.end());
    std::sort(tags.begin(), tags.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < tags.size() && i < 5; ++i) os << " " << tags[i].first << "=" << format_bytes(tags[i].second);
    if (tags.empty()) os << " (none)";
    throw MemoryError(check_failure_message(ErrorKind::Memory, "MemoryTracker::reserve", os.str(), __func__,
                                            __FILE__, __LINE__));
  }
  current_ += bytes;
  peak_ = std::max(peak_, current_);
  ++count_;
  by_tag_[tag] += bytes;
}

void MemoryTracker::release(int64_t bytes, const std::string& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  current_ -= bytes;
  --count_;
  auto it = by_tag_.find(tag);
  if (it != by_tag_.end()) {
    it->second -= bytes;
    if (it->second <= 0) by_tag_.erase(it);
  }
}

MemoryStats MemoryTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return MemoryStats{current_, peak_, cap_, count_};
}

void MemoryTracker::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = current_;
}

std::vector<std::pair<std::string, int64_t>> MemoryTracker::live_by_tag() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, int64_t>> tags(by_tag_.begin(), by_tag_.end());
  std::sort(tags.begin(), tags.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return tags;
}

void* device_allocate(MemoryTracker& tracker, int64_t bytes, const std::string& tag) {
  tracker.reserve(bytes, tag);
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  try {
    if (tracker.device().is_cpu()) {
      const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
      p = std::aligned_alloc(64, rounded);
      PF_REQUIRE(MemoryError, p != nullptr, "host allocation of " << format_bytes(bytes) << " for '" << tag << "' failed");
    } else {
      p = cuda_raw_allocate(tracker.device(), bytes);
    }
  } catch (...) {
    tracker.release(bytes, tag);
    throw;
  }
  return p;
}

void device_free(MemoryTracker& tracker, void* ptr, int64_t bytes, const std::string& tag) {
  if (ptr) {
    if (tracker.device().is_cpu()) std::free(ptr);
    else cuda_raw_free(tracker.device(), ptr);
  }
  tracker.release(bytes, tag);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) std::memcpy(dst, src, static_cast<size_t>(bytes));
  else cuda_copy_bytes(dst, dst_device, src, src_device, bytes);
}

void fill_zero(void* dst, Device device, int64_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) std::memset(dst, 0, static_cast<size_t>(bytes));
  else cuda_fill_zero(dst, device, bytes);
}

}  // namespace pf
