#include "runtime/check.h"
#include "runtime/exec.h"

namespace pf {

void host_launch(const ExecContext& ctx, std::function<void()> work) {
  PF_REQUIRE(ValueError, ctx.device.is_cpu() && ctx.stream.device == ctx.device,
             "CPU work launched from a context on " << ctx.device.str() << " with a stream of "
                                                    << ctx.stream.device.str());
  host_launch(ctx.stream, std::move(work));
}

}  // namespace pf
