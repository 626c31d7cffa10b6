#include "kernels/heads/heads.h"
#include "runtime/check.h"

namespace pf {

void heads_split_cuda(const ExecContext& ctx, const HeadsShape&, const float*, float*) {
  PF_REQUIRE(CudaError, false, "heads_split on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}
void heads_merge_cuda(const ExecContext& ctx, const HeadsShape&, const float*, float*) {
  PF_REQUIRE(CudaError, false, "heads_merge on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
