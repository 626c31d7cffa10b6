// Layer-norm CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/layernorm/layernorm.h"
#include "runtime/check.h"

namespace pf {

void layernorm_forward_cuda(const ExecContext& ctx, const float*, const float*, const float*, float*, float*, float*,
                            int64_t, int64_t, float) {
  PF_REQUIRE(CudaError, false, "layernorm_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void layernorm_backward_cuda(const ExecContext& ctx, const float*, const float*, const float*, const float*,
                             const float*, float*, float*, float*, int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "layernorm_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
