// CUDA memory entry points for builds without the CUDA backend: every call is
// a clear error naming the device.
#include "runtime/check.h"
#include "runtime/device.h"

namespace pf {

void* cuda_raw_allocate(const Stream& stream, int64_t) {
  set_current_device(stream.device);  // throws with the reason
  return nullptr;
}
void cuda_raw_free(const Stream&, void*) {}
void cuda_copy_bytes(const Stream& stream, void*, Device, const void*, Device, int64_t) {
  set_current_device(stream.device);
}
void cuda_fill_zero(const Stream& stream, void*, int64_t) { set_current_device(stream.device); }
void cuda_copy_rows(const Stream& stream, void*, int64_t, const void*, int64_t, int64_t, int64_t) {
  set_current_device(stream.device);
}

void cuda_device_synchronize(Device device) { set_current_device(device); }

int64_t cuda_pool_used_high(Device device, bool) {
  set_current_device(device);
  return -1;
}

}  // namespace pf
