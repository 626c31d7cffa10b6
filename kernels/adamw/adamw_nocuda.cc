// AdamW CUDA entry point in a build without the CUDA backend: it throws.
#include "kernels/adamw/adamw.h"
#include "runtime/check.h"

namespace pf {

void adamw_update_cuda(const ExecContext& ctx, float*, const float*, float*, float*, int64_t, int64_t,
                       const AdamWConfig&, float) {
  PF_REQUIRE(CudaError, false, "adamw_update on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
