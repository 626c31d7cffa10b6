// Builds without the CUDA backend: the CUDA entry points report that.
#include "kernels/feature_map/feature_map.h"
#include "runtime/check.h"

namespace pf {

void feature_map_forward_cuda(const ExecContext& ctx, const FeatureMapParams&, int64_t, int64_t, int64_t, const float*,
                              const float*, float*, float*) {
  PF_REQUIRE(CudaError, false, "feature_map_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void feature_map_backward_cuda(const ExecContext& ctx, const FeatureMapParams&, int64_t, int64_t, int64_t, const float*,
                               const float*, const float*, const float*, float*, float*) {
  PF_REQUIRE(CudaError, false, "feature_map_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void feature_map_forward_cuda(const ExecContext& ctx, const FeatureMapParams&, DType, int64_t, int64_t, int64_t,
                              const void*, const float*, void*, float*) {
  PF_REQUIRE(CudaError, false, "feature_map_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void feature_map_backward_cuda(const ExecContext& ctx, const FeatureMapParams&, DType, int64_t, int64_t, int64_t,
                               const void*, const float*, const void*, const void*, void*) {
  PF_REQUIRE(CudaError, false, "feature_map_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
