// Cross-entropy CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/cross_entropy/cross_entropy.h"
#include "runtime/check.h"

namespace pf {

CrossEntropySums cross_entropy_forward_cuda(const ExecContext& ctx, const float*, const int32_t*, float*, int64_t,
                                            int64_t) {
  PF_REQUIRE(CudaError, false, "cross_entropy_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
  return {};
}

void cross_entropy_backward_cuda(const ExecContext& ctx, const float*, const int32_t*, float*, int64_t, int64_t,
                                 float) {
  PF_REQUIRE(CudaError, false, "cross_entropy_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
