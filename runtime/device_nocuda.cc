// Device functions for builds without the CUDA backend.
#include "runtime/check.h"
#include "runtime/device.h"

namespace pf {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "this build has no CUDA backend (nvcc was not found)"; }
int compute_capability(Device device) {
  PF_REQUIRE(CudaError, device.is_cpu(), "device " << device.str() << " queried, but " << cuda_unavailable_reason());
  return 0;
}
void set_current_device(Device device) {
  PF_REQUIRE(CudaError, device.is_cpu(), "device " << device.str() << " requested, but " << cuda_unavailable_reason());
}
Stream create_stream(Device device) {
  set_current_device(device);
  return Stream{device, nullptr};
}
void destroy_stream(Stream& stream) { stream.handle = nullptr; }
void synchronize(const Stream&) {}

}  // namespace pf
