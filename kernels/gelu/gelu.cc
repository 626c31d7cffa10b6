// Dispatch of the GELU kernels by ctx.device.
#include "kernels/gelu/gelu.h"

namespace pf {

void gelu_forward(const ExecContext& ctx, const float* X, float* Y, int64_t n) {
  if (ctx.device.is_cuda()) gelu_forward_cuda(ctx, X, Y, n);
  else gelu_forward_cpu(ctx, X, Y, n);
}

void gelu_backward(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n) {
  if (ctx.device.is_cuda()) gelu_backward_cuda(ctx, dY, X, dX, n);
  else gelu_backward_cpu(ctx, dY, X, dX, n);
}

}  // namespace pf
