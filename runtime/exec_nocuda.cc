#include "runtime/check.h"
#include "runtime/exec.h"

namespace pf {

ExecResources::ExecResources(Device device, MemoryTracker& tracker, const HostStreamConfig& host_streams) {
  PF_REQUIRE(ValueError, tracker.device() == device,
             "tracker for " << tracker.device().str() << " given for device " << device.str());
  ctx_.device = device;
  ctx_.stream = create_stream(device, host_streams);
  tracker.set_stream(ctx_.stream);
  ctx_.tracker = &tracker;
}

ExecResources::~ExecResources() {
  // Drains the stream (queued releases run), then later releases are immediate.
  destroy_stream(ctx_.stream);
  ctx_.tracker->set_stream(Stream{ctx_.device, nullptr});
}

}  // namespace pf
