// Temporary buffers of the feature-map backends, allocated on ctx.device and
// recorded in ctx.tracker under a tag. On the CPU a context without a tracker
// gets a private one; on CUDA a tracker is required.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/check.h"
#include "runtime/exec.h"
#include "runtime/memory.h"

namespace pf {

class FeatureScratch {
 public:
  FeatureScratch(const ExecContext& ctx, int64_t bytes, std::string tag) : bytes_(bytes), tag_(std::move(tag)) {
    if (ctx.tracker != nullptr) {
      tracker_ = ctx.tracker;
    } else {
      PF_REQUIRE(ValueError, ctx.device.is_cpu(),
                 tag_ << ": an ExecContext on " << ctx.device.str() << " needs a MemoryTracker for temporaries");
      own_ = std::make_unique<MemoryTracker>(Device::cpu());
      tracker_ = own_.get();
    }
    ptr_ = device_allocate(*tracker_, bytes_, tag_);
  }
  ~FeatureScratch() { device_free(*tracker_, ptr_, bytes_, tag_); }
  FeatureScratch(const FeatureScratch&) = delete;
  FeatureScratch& operator=(const FeatureScratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  int64_t bytes_;
  std::string tag_;
  std::unique_ptr<MemoryTracker> own_;
  MemoryTracker* tracker_ = nullptr;
  void* ptr_ = nullptr;
};

}  // namespace pf
