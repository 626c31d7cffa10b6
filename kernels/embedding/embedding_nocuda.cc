// Embedding CUDA entry points in a build without the CUDA backend: they throw.
#include "kernels/embedding/embedding.h"
#include "runtime/check.h"

namespace pf {

void embedding_forward_cuda(const ExecContext& ctx, const int32_t*, const float*, float*, int64_t, int64_t, int64_t) {
  PF_REQUIRE(CudaError, false, "embedding_forward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void embedding_backward_cuda(const ExecContext& ctx, const int32_t*, const float*, float*, int64_t, int64_t,
                             int64_t) {
  PF_REQUIRE(CudaError, false, "embedding_backward on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
