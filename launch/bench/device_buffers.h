// Benchmark inputs: keyed uniform values, and fp32 buffers on a benchmark's
// device (CPU or GPU), filled from the host and released with the tracker
// when the Buffers go out of scope.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/memory.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace pf::bench {

// n values uniform in [-scale/2, scale/2), keyed by (seed, stream): the same
// on any number of threads (the GPU's inputs reach ~1.5e9 values).
inline std::vector<float> keyed_uniform(int64_t n, uint64_t seed, uint64_t stream, float scale = 1.f) {
  const KeyedRandom rng(seed, stream, 0);
  std::vector<float> v(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(rng.uniform(static_cast<uint64_t>(i)) - 0.5);
  return v;
}

class Buffers {
 public:
  explicit Buffers(MemoryTracker& tracker) : tracker_(tracker) {}
  float* make(const std::vector<float>& host) {
    float* p = make(static_cast<int64_t>(host.size()));
    copy_bytes_blocking(p, tracker_.device(), host.data(), Device::cpu(), static_cast<int64_t>(host.size()) * 4);
    return p;
  }
  float* make(int64_t count) { return static_cast<float*>(make(count, DType::f32)); }
  // `count` elements of `type` (16-bit storage, say), uninitialised.
  void* make(int64_t count, DType type) {
    tensors_.push_back(Tensor::empty({std::max<int64_t>(count, 1)}, type, tracker_, "bench"));
    return tensors_.back().raw();
  }

 private:
  MemoryTracker& tracker_;
  std::vector<Tensor> tensors_;
};

}  // namespace pf::bench
