// Dispatch of the linear layer by ctx.device.
#include "kernels/linear/linear.h"

namespace pf {

void linear_forward(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                    int64_t in, int64_t out) {
  if (ctx.device.is_cuda()) linear_forward_cuda(ctx, X, W, b, Y, T, in, out);
  else linear_forward_cpu(X, W, b, Y, T, in, out);
}

void linear_backward(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int64_t T, int64_t in, int64_t out) {
  if (ctx.device.is_cuda()) linear_backward_cuda(ctx, dY, X, W, dX, dW, db, T, in, out);
  else linear_backward_cpu(dY, X, W, dX, dW, db, T, in, out);
}

}  // namespace pf
