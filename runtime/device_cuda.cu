// Device functions for builds with the CUDA backend. A missing driver or GPU is
// a normal answer (0 devices), not an error.
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/device.h"
#include "runtime/stream_cuda.h"

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

namespace detail {

void cuda_bind_device(Device device) { PF_CUDA_CHECK(cudaSetDevice(device.index)); }

void* cuda_stream_create(Device device) {
  cuda_bind_device(device);
  cudaStream_t h = nullptr;
  PF_CUDA_CHECK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
  return h;
}

void cuda_stream_destroy(void* handle) {
  cudaStreamSynchronize(static_cast<cudaStream_t>(handle));
  cudaStreamDestroy(static_cast<cudaStream_t>(handle));
}

void cuda_stream_synchronize(const Stream& stream) { PF_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(stream))); }

std::shared_ptr<void> cuda_event_record(const Stream& stream) {
  cuda_bind_device(stream.device);
  cudaEvent_t e = nullptr;
  PF_CUDA_CHECK(cudaEventCreate(&e));  // with timing: event_elapsed_seconds reads it
  std::shared_ptr<void> owned(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  PF_CUDA_CHECK(cudaEventRecord(e, cuda_stream(stream)));
  return owned;
}

void cuda_event_wait(const Stream& stream, const Event& event) {
  PF_CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(stream), static_cast<cudaEvent_t>(event.impl().get()), 0));
}

void cuda_event_synchronize(const Event& event) {
  PF_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event.impl().get())));
}

double cuda_event_elapsed(const Event& start, const Event& end) {
  cuda_event_synchronize(end);
  float ms = 0;
  PF_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.impl().get()),
                                     static_cast<cudaEvent_t>(end.impl().get())));
  return ms / 1e3;
}

}  // namespace detail

}  // namespace pf
