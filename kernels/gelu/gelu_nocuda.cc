// GELU CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/gelu/gelu.h"
#include "runtime/check.h"

namespace pf {

void gelu_forward_cuda(const ExecContext& ctx, const float*, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "gelu_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void gelu_backward_cuda(const ExecContext& ctx, const float*, const float*, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "gelu_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
