// Cast CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/cast/cast.h"
#include "runtime/check.h"

namespace pf {

void cast_narrow_cuda(const ExecContext& ctx, DType, const float*, void*, int64_t) {
  PF_REQUIRE(CudaError, false, "cast_narrow on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void cast_widen_cuda(const ExecContext& ctx, DType, const void*, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "cast_widen on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
