// Device pieces of the scans: the elementwise sum combine on a CUDA device
// (out[i] = earlier[i] + later[i], identity 0, all on the caller's stream),
// and the select of the segmented combine.
#include <cuda_runtime.h>

#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/scan_impl.h"
#include "runtime/scan_segment_math.h"
#include "runtime/scan_sum_math.h"

namespace pf::detail {
namespace {

template <typename T>
__global__ void sum_combine_kernel(const T* earlier, const T* later, T* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    scan_sum_element(earlier, later, out, i);
}

template <typename T>
class CudaSumCombine final : public ScanCombine {
 public:
  explicit CudaSumCombine(Device device) : device_(device) {}
  DType dtype() const override { return dtype_of<T>::value; }
  Device device() const override { return device_; }
  const char* name() const override { return "sum"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    PF_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(count) * sizeof(T), cuda_stream(stream)));
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    if (count == 0) return;
    constexpr int kThreads = 256;
    sum_combine_kernel<T><<<grid_size(count, kThreads, 4096), kThreads, 0, cuda_stream(stream)>>>(
        static_cast<const T*>(earlier), static_cast<const T*>(later), static_cast<T*>(out), count);
    PF_CUDA_CHECK_LAUNCH();
  }

 private:
  Device device_;
};

template <typename T>
__global__ void segment_value_kernel(const T* later, const T* combined, T* out, int64_t g, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    segment_value_element(later, combined, out, g, i / g, i % g);
}

template <typename T>
__global__ void segment_flag_kernel(const T* earlier, const T* later, T* out, int64_t g, int64_t granules) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < granules; j += stride)
    segment_flag_element(earlier, later, out, g, j);
}

template <typename T>
void segment_select(const void* earlier, const void* later, const void* combined, void* out, int64_t granules,
                    int64_t g, const Stream& stream) {
  constexpr int kThreads = 256;
  const cudaStream_t s = cuda_stream(stream);
  const T *e = static_cast<const T*>(earlier), *l = static_cast<const T*>(later);
  segment_value_kernel<T><<<grid_size(granules * g, kThreads, 4096), kThreads, 0, s>>>(
      l, static_cast<const T*>(combined), static_cast<T*>(out), g, granules * g);
  PF_CUDA_CHECK_LAUNCH();
  segment_flag_kernel<T><<<grid_size(granules, kThreads, 4096), kThreads, 0, s>>>(e, l, static_cast<T*>(out), g,
                                                                                  granules);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void segment_select_cuda(DType dtype, const void* earlier, const void* later, const void* combined, void* out,
                         int64_t granules, int64_t g, const Stream& stream) {
  if (granules == 0) return;
  DeviceGuard bind(stream.device);
  switch (dtype) {
    case DType::f32: return segment_select<float>(earlier, later, combined, out, granules, g, stream);
    case DType::f64: return segment_select<double>(earlier, later, combined, out, granules, g, stream);
    default: return segment_select<int64_t>(earlier, later, combined, out, granules, g, stream);
  }
}

std::unique_ptr<ScanCombine> make_sum_combine_cuda(DType dtype, Device device) {
  switch (dtype) {
    case DType::f32: return std::make_unique<CudaSumCombine<float>>(device);
    case DType::f64: return std::make_unique<CudaSumCombine<double>>(device);
    default: return std::make_unique<CudaSumCombine<int64_t>>(device);
  }
}

}  // namespace pf::detail
