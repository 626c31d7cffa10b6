#include "kernels/gemm/gemm.h"
#include "runtime/check.h"

namespace pf {

void gemm_f32_cuda(const ExecContext& ctx, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                   const float*, int64_t, float, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "gemm on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void gemm_lowp_cuda(const ExecContext& ctx, DType, bool, bool, int64_t, int64_t, int64_t, float, const void*, int64_t,
                    const void*, int64_t, float, float*, int64_t) {
  PF_REQUIRE(CudaError, false, "gemm_lowp on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
