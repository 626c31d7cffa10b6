// fp32 buffers on a benchmark's device (CPU or GPU), filled from the host and
// released with the tracker when the Buffers go out of scope.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf::bench {

class Buffers {
 public:
  explicit Buffers(MemoryTracker& tracker) : tracker_(tracker) {}
  float* make(const std::vector<float>& host) {
    float* p = make(static_cast<int64_t>(host.size()));
    copy_bytes_blocking(p, tracker_.device(), host.data(), Device::cpu(), static_cast<int64_t>(host.size()) * 4);
    return p;
  }
  float* make(int64_t count) {
    tensors_.push_back(Tensor::empty({std::max<int64_t>(count, 1)}, DType::f32, tracker_, "bench"));
    return tensors_.back().data<float>();
  }

 private:
  MemoryTracker& tracker_;
  std::vector<Tensor> tensors_;
};

}  // namespace pf::bench
