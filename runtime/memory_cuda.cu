// CUDA memory: plain cudaMalloc (never managed memory) and cudaMemcpy.
#include "runtime/cuda_check.cuh"
#include "runtime/device.h"
#include "runtime/memory.h"

namespace pf {

void* cuda_raw_allocate(Device device, int64_t bytes) {
  set_current_device(device);
  void* p = nullptr;
  PF_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
  return p;
}

void cuda_raw_free(Device device, void* ptr) {
  set_current_device(device);
  cudaFree(ptr);
}

void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t bytes) {
  if (dst_device.is_cuda()) set_current_device(dst_device);
  else set_current_device(src_device);
  PF_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault));
}

void cuda_fill_zero(void* dst, Device device, int64_t bytes) {
  set_current_device(device);
  PF_CUDA_CHECK(cudaMemset(dst, 0, static_cast<size_t>(bytes)));
}

}  // namespace pf
