// Device functions for builds without the CUDA backend: CUDA devices do not
// exist, and every CUDA stream or event call is a clear error.
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/stream_cuda.h"

namespace pf {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "this build has no CUDA backend (nvcc was not found)"; }
int compute_capability(Device device) {
  PF_REQUIRE(CudaError, device.is_cpu(), "device " << device.str() << " queried, but " << cuda_unavailable_reason());
  return 0;
}

namespace detail {
namespace {
[[noreturn]] void no_cuda(Device device) {
  PF_REQUIRE(CudaError, false, "device " << device.str() << " requested, but " << cuda_unavailable_reason());
  throw;  // unreachable
}
}  // namespace
void cuda_bind_device(Device device) { no_cuda(device); }
void* cuda_stream_create(Device device) { no_cuda(device); }
void cuda_stream_destroy(void*) {}
void cuda_stream_synchronize(const Stream& stream) { no_cuda(stream.device); }
std::shared_ptr<void> cuda_event_record(const Stream& stream) { no_cuda(stream.device); }
void cuda_event_wait(const Stream& stream, const Event&) { no_cuda(stream.device); }
void cuda_event_synchronize(const Event& event) { no_cuda(event.device()); }
double cuda_event_elapsed(const Event& start, const Event&) { no_cuda(start.device()); }
}  // namespace detail

}  // namespace pf
