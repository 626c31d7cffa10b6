// Gated-mix CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/gated_mix/gated_mix.h"
#include "runtime/check.h"

namespace pf {

void gated_mix_forward_cuda(const ExecContext& ctx, const GatedMixShape&, const float*, const float*, const float*,
                            float*) {
  PF_REQUIRE(CudaError, false, "gated_mix_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void gated_mix_backward_cuda(const ExecContext& ctx, const GatedMixShape&, const float*, const float*, const float*,
                             const float*, float*, float*, float*) {
  PF_REQUIRE(CudaError, false, "gated_mix_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
