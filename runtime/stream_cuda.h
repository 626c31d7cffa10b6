// The CUDA half of streams and events, defined in device_cuda.cu (and as clear
// errors in device_nocuda.cc). Private to runtime/.
#pragma once

#include <memory>

#include "runtime/device.h"

namespace pf::detail {

void cuda_bind_device(Device device);
void* cuda_stream_create(Device device);
void cuda_stream_destroy(void* handle);
void cuda_stream_synchronize(const Stream& stream);
std::shared_ptr<void> cuda_event_record(const Stream& stream);
void cuda_event_wait(const Stream& stream, const Event& event);
void cuda_event_synchronize(const Event& event);
double cuda_event_elapsed(const Event& start, const Event& end);

}  // namespace pf::detail
