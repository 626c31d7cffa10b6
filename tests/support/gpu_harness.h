// Device memory for the GPU tests: one CUDA device with its execution
// context, zeroed buffers freed at the end of the test, uploads and downloads
// of fp32 and of 16-bit storage (rounded on the host, tests/support/storage.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/storage.h"

namespace pf::test {

class Gpu {
 public:
  Gpu() : tracker_(Device::cuda(0)), res_(Device::cuda(0), tracker_) {}
  const ExecContext& ctx() const { return res_.ctx(); }
  MemoryTracker& tracker() { return tracker_; }
  float* alloc(int64_t count) {
    const int64_t bytes = std::max<int64_t>(count, 1) * 4;
    float* p = static_cast<float*>(device_allocate(tracker_, bytes, "test"));
    fill_zero_blocking(p, Device::cuda(0), bytes);
    buffers_.push_back({p, bytes});
    return p;
  }
  // A buffer of `count` 16-bit storage elements holding x rounded to t.
  void* upload_storage(const std::vector<float>& x, DType t) {
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) bits[i] = to_storage(x[i], t);
    const int64_t bytes = std::max<int64_t>(static_cast<int64_t>(x.size()), 1) * 2;
    void* p = device_allocate(tracker_, bytes, "test");
    fill_zero_blocking(p, Device::cuda(0), bytes);
    buffers_.push_back({p, bytes});
    copy_bytes_blocking(p, Device::cuda(0), bits.data(), Device::cpu(), static_cast<int64_t>(x.size()) * 2);
    return p;
  }
  void* alloc_storage(int64_t count) { return upload_storage(std::vector<float>(count, 0.f), DType::f16); }
  std::vector<float> download_storage(const void* p, int64_t count, DType t) {
    synchronize(ctx().stream);
    std::vector<uint16_t> bits(count);
    copy_bytes_blocking(bits.data(), Device::cpu(), p, Device::cuda(0), count * 2);
    std::vector<float> x(count);
    for (int64_t i = 0; i < count; ++i) x[i] = from_storage(bits[i], t);
    return x;
  }
  int64_t tracked_bytes() const { return tracker_.stats().current_bytes; }
  float* upload(const std::vector<float>& x) {
    float* p = alloc(static_cast<int64_t>(x.size()));
    copy_bytes_blocking(p, Device::cuda(0), x.data(), Device::cpu(), static_cast<int64_t>(x.size()) * 4);
    return p;
  }
  std::vector<float> download(const float* p, int64_t count) {
    synchronize(ctx().stream);
    std::vector<float> x(count);
    copy_bytes_blocking(x.data(), Device::cpu(), p, Device::cuda(0), count * 4);
    return x;
  }
  ~Gpu() {
    for (auto& b : buffers_) device_free(tracker_, b.first, b.second, "test");
  }

 private:
  MemoryTracker tracker_;
  ExecResources res_;
  std::vector<std::pair<void*, int64_t>> buffers_;
};

}  // namespace pf::test
