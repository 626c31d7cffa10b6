// CUDA memory entry points for builds without the CUDA backend: every call is
// a clear error naming the device.
#include "runtime/check.h"
#include "runtime/device.h"

namespace pf {

void* cuda_raw_allocate(Device device, int64_t) {
  set_current_device(device);  // throws with the reason
  return nullptr;
}
void cuda_raw_free(Device, void*) {}
void cuda_copy_bytes(void*, Device dst_device, const void*, Device src_device, int64_t) {
  set_current_device(dst_device);
  set_current_device(src_device);
}
void cuda_fill_zero(void*, Device device, int64_t) { set_current_device(device); }

}  // namespace pf
