// Residual-add CUDA entry point in a build without the CUDA backend: it throws.
#include "kernels/residual/residual.h"
#include "runtime/check.h"

namespace pf {

void residual_add_cuda(const ExecContext& ctx, const float*, const float*, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "residual_add on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
