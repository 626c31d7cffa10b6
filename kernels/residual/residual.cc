// Dispatch of the residual add by ctx.device.
#include "kernels/residual/residual.h"

namespace pf {

void residual_add(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n) {
  if (ctx.device.is_cuda()) residual_add_cuda(ctx, a, b, out, n);
  else residual_add_cpu(ctx, a, b, out, n);
}

}  // namespace pf
