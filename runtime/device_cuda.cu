// Device functions for builds with the CUDA backend. A missing driver or GPU is
// a normal answer (0 devices), not an error.
#include "runtime/cuda_check.cuh"
#include "runtime/device.h"

namespace pf {

bool cuda_compiled() { return true; }

namespace {
cudaError_t query_count(int* count) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky status so later calls are not poisoned
    *count = 0;
  }
  return e;
}
}  // namespace

int cuda_device_count() {
  int n = 0;
  query_count(&n);
  return n;
}

std::string cuda_unavailable_reason() {
  int n = 0;
  cudaError_t e = query_count(&n);
  if (e != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
  return n == 0 ? "no CUDA device present" : "";
}

int compute_capability(Device device) {
  if (device.is_cpu()) return 0;
  int major = 0, minor = 0;
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index));
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index));
  return major * 10 + minor;
}

void set_current_device(Device device) {
  if (device.is_cpu()) return;
  PF_CUDA_CHECK(cudaSetDevice(device.index));
}

Stream create_stream(Device device) {
  Stream s{device, nullptr};
  if (device.is_cuda()) {
    set_current_device(device);
    cudaStream_t h = nullptr;
    PF_CUDA_CHECK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
    s.handle = h;
  }
  return s;
}

void destroy_stream(Stream& stream) {
  if (stream.device.is_cuda() && stream.handle) cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle));
  stream.handle = nullptr;
}

void synchronize(const Stream& stream) {
  if (stream.device.is_cuda()) PF_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
}

}  // namespace pf
