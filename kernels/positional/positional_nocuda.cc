#include "kernels/positional/positional.h"
#include "runtime/check.h"

namespace pf {

void sinusoidal_add_cuda(const ExecContext& ctx, float*, int64_t, int64_t, int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "sinusoidal_add on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
