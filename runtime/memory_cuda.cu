// CUDA memory, stream ordered: cudaMallocAsync / cudaFreeAsync from the
// device's memory pool (no free synchronises the device), cudaMemcpyAsync and
// cudaMemsetAsync on the caller's stream (never the legacy stream, which does
// not wait for the non-blocking compute and communication streams).
#include <cstdint>

#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/device.h"
#include "runtime/memory.h"

namespace pf {

void* cuda_raw_allocate(const Stream& stream, int64_t bytes) {
  DeviceGuard bind(stream.device);
  void* p = nullptr;
  PF_CUDA_CHECK(cudaMallocAsync(&p, static_cast<size_t>(bytes), cuda_stream(stream)));
  return p;
}

void cuda_raw_free(const Stream& stream, void* ptr) {
  DeviceGuard bind(stream.device);
  cudaFreeAsync(ptr, cuda_stream(stream));
}

void cuda_copy_bytes(const Stream& stream, void* dst, Device, const void* src, Device, int64_t bytes) {
  DeviceGuard bind(stream.device);
  PF_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, cuda_stream(stream)));
}

void cuda_copy_rows(const Stream& stream, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                    int64_t row_bytes, int64_t rows) {
  DeviceGuard bind(stream.device);
  PF_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src, static_cast<size_t>(src_pitch),
                                  static_cast<size_t>(row_bytes), static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                                  cuda_stream(stream)));
}

void cuda_fill_zero(const Stream& stream, void* dst, int64_t bytes) {
  DeviceGuard bind(stream.device);
  PF_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), cuda_stream(stream)));
}

void cuda_device_synchronize(Device device) {
  DeviceGuard bind(device);
  PF_CUDA_CHECK(cudaDeviceSynchronize());
}

int64_t cuda_pool_used_high(Device device, bool reset) {
  DeviceGuard bind(device);
  cudaMemPool_t pool = nullptr;
  PF_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device.index));
  uint64_t high = 0;
  PF_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
  if (reset) {
    uint64_t zero = 0;
    PF_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  return static_cast<int64_t>(high);
}

}  // namespace pf
