#include "runtime/memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/check.h"

namespace pf {

// Defined in memory_cuda.cu or memory_nocuda.cc.
void* cuda_raw_allocate(const Stream& stream, int64_t bytes);
void cuda_raw_free(const Stream& stream, void* ptr);
void cuda_copy_bytes(const Stream& stream, void* dst, Device dst_device, const void* src, Device src_device,
                     int64_t bytes);
void cuda_fill_zero(const Stream& stream, void* dst, int64_t bytes);
void cuda_copy_rows(const Stream& stream, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                    int64_t row_bytes, int64_t rows);
void cuda_device_synchronize(Device device);
int64_t cuda_pool_used_high(Device device, bool reset);

int64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

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

MemoryTracker::MemoryTracker(Device device, int64_t cap_bytes)
    : device_(device),
      stream_{device, nullptr},
      cap_(cap_bytes),
      pool_(device.is_cpu() ? std::make_shared<HostPool>() : nullptr) {}

void MemoryTracker::set_stream(const Stream& stream) {
  PF_REQUIRE(ValueError, stream.device == device_,
             "memory tracker of " << device_.str() << " given a stream of " << stream.device.str());
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = stream;
}

Stream MemoryTracker::stream() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_;
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
  high_ = std::max(high_, current_);
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

int64_t MemoryTracker::high_water_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return high_;
}

std::shared_ptr<HostPool> MemoryTracker::host_pool() const {
  PF_REQUIRE(ValueError, pool_ != nullptr, "the tracker of " << device_.str() << " has no host pool");
  return pool_;
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
      if (host_pool_takes(bytes)) {
        p = tracker.host_pool()->take(bytes, tracker.high_water_bytes());
      } else {
        p = std::aligned_alloc(64, (static_cast<size_t>(bytes) + 63) / 64 * 64);
        PF_REQUIRE(MemoryError, p != nullptr,
                   "host allocation of " << format_bytes(bytes) << " for '" << tag << "' failed");
      }
      if (stream_poisons_memory(tracker.stream())) std::memset(p, 0xff, static_cast<size_t>(bytes));  // NaN floats
    } else {
      p = cuda_raw_allocate(tracker.stream(), bytes);
    }
  } catch (...) {
    tracker.release(bytes, tag);
    throw;
  }
  return p;
}

void device_free(MemoryTracker& tracker, void* ptr, int64_t bytes, const std::string& tag, const Stream* stream) {
  tracker.release(bytes, tag);
  if (!ptr) return;
  const Stream on = stream ? *stream : tracker.stream();
  if (tracker.device().is_cpu()) {
    // With jitter, released memory turns to NaN first: a use after release shows.
    const size_t poison = stream_poisons_memory(on) ? static_cast<size_t>(bytes) : 0;
    std::shared_ptr<HostPool> pool = host_pool_takes(bytes) ? tracker.host_pool() : nullptr;
    if (pool) pool->retire(ptr);  // released now for the tracker and the pool's bound
    host_release(on, [ptr, poison, pool] {
      if (poison) std::memset(ptr, 0xff, poison);
      if (pool)
        pool->give(ptr);
      else
        std::free(ptr);
    });
  }
  else cuda_raw_free(on, ptr);
}

void copy_bytes(const Stream& stream, void* dst, Device dst_device, const void* src, Device src_device,
                int64_t bytes) {
  if (bytes == 0) return;
  if (stream.device.is_cpu()) {
    PF_REQUIRE(ValueError, dst_device.is_cpu() && src_device.is_cpu(),
               "copy between " << src_device.str() << " and " << dst_device.str() << " on a CPU stream");
    host_launch(stream, [=] { std::memcpy(dst, src, static_cast<size_t>(bytes)); });
  } else {
    cuda_copy_bytes(stream, dst, dst_device, src, src_device, bytes);
  }
}

void copy_rows(const Stream& stream, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
               int64_t row_bytes, int64_t rows, Device device) {
  if (row_bytes == 0 || rows == 0) return;
  PF_REQUIRE(ValueError, stream.device == device && row_bytes <= dst_pitch && row_bytes <= src_pitch,
             "copy of " << rows << " rows of " << row_bytes << " bytes (pitches " << src_pitch << " -> " << dst_pitch
                        << ") of " << device.str() << " memory on a " << stream.device.str() << " stream");
  if (device.is_cpu()) {
    host_launch(stream, [=] {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                    static_cast<size_t>(row_bytes));
    });
  } else {
    cuda_copy_rows(stream, dst, dst_pitch, src, src_pitch, row_bytes, rows);
  }
}

void fill_zero(const Stream& stream, void* dst, Device device, int64_t bytes) {
  if (bytes == 0) return;
  PF_REQUIRE(ValueError, stream.device == device,
             "clear of " << device.str() << " memory on a " << stream.device.str() << " stream");
  if (device.is_cpu()) host_launch(stream, [=] { std::memset(dst, 0, static_cast<size_t>(bytes)); });
  else cuda_fill_zero(stream, dst, bytes);
}

void copy_bytes_blocking(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes) {
  const Device device = dst_device.is_cuda() ? dst_device : src_device;
  if (device.is_cuda()) cuda_device_synchronize(device);
  const Stream now{device, nullptr};  // synchronous on the CPU, the legacy stream on CUDA (after the idle device)
  copy_bytes(now, dst, dst_device, src, src_device, bytes);
  if (device.is_cuda()) cuda_device_synchronize(device);
}

void fill_zero_blocking(void* dst, Device device, int64_t bytes) {
  if (device.is_cuda()) cuda_device_synchronize(device);
  fill_zero(Stream{device, nullptr}, dst, device, bytes);
  if (device.is_cuda()) cuda_device_synchronize(device);
}

int64_t device_pool_used_high(Device device, bool reset) {
  return device.is_cuda() ? cuda_pool_used_high(device, reset) : -1;
}

}  // namespace pf
