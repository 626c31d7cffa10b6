// Linear-layer CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/linear/linear.h"
#include "runtime/check.h"

namespace pf {

void linear_forward_cuda(const ExecContext& ctx, const float*, const float*, const float*, float*, int64_t, int64_t,
                         int64_t) {
  PF_REQUIRE(CudaError, false, "linear_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void linear_backward_cuda(const ExecContext& ctx, const float*, const float*, const float*, float*, float*, float*,
                          int64_t, int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "linear_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void linear_forward_lowp_cuda(const ExecContext& ctx, DType, const void*, const void*, const float*, float*, int64_t,
                              int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "linear_forward_lowp on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void linear_backward_lowp_cuda(const ExecContext& ctx, DType, const float*, const void*, const void*, float*, float*,
                               float*, int64_t, int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "linear_backward_lowp on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
