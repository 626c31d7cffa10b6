#include "runtime/check.h"
#include "runtime/exec.h"

namespace pf {

ExecResources::ExecResources(Device device, MemoryTracker& tracker) {
  PF_REQUIRE(ValueError, tracker.device() == device,
             "tracker for " << tracker.device().str() << " given for device " << device.str());
  set_current_device(device);  // throws for CUDA devices in this build
  ctx_.device = device;
  ctx_.stream = create_stream(device);
  ctx_.tracker = &tracker;
}

ExecResources::~ExecResources() { destroy_stream(ctx_.stream); }

}  // namespace pf
