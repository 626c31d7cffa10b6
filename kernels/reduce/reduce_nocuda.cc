// Reduction CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/reduce/reduce.h"
#include "runtime/check.h"

namespace pf {

double sum_of_squares_cuda(const ExecContext& ctx, const float*, int64_t) {
  PF_REQUIRE(CudaError, false, "sum_of_squares on " << ctx.device.str() << ": " << cuda_unavailable_reason());
  return 0.0;
}

void scale_values_cuda(const ExecContext& ctx, float*, int64_t, float) {
  PF_REQUIRE(CudaError, false, "scale_values on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
