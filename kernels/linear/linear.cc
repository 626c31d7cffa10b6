// Dispatch of the linear layer by ctx.device.
#include "kernels/linear/linear.h"

#include "kernels/cast/cast.h"

namespace pf {

void linear_forward(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                    int64_t in, int64_t out) {
  if (ctx.device.is_cuda()) linear_forward_cuda(ctx, X, W, b, Y, T, in, out);
  else linear_forward_cpu(ctx, X, W, b, Y, T, in, out);
}

void linear_backward(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int64_t T, int64_t in, int64_t out) {
  if (ctx.device.is_cuda()) linear_backward_cuda(ctx, dY, X, W, dX, dW, db, T, in, out);
  else linear_backward_cpu(ctx, dY, X, W, dX, dW, db, T, in, out);
}

void linear_forward_lowp(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                         float* Y, int64_t T, int64_t in, int64_t out) {
  require_16bit_storage(storage, "linear_forward_lowp");
  if (ctx.device.is_cuda()) linear_forward_lowp_cuda(ctx, storage, X, W, b, Y, T, in, out);
  else linear_forward_lowp_cpu(ctx, storage, X, W, b, Y, T, in, out);
}

void linear_backward_lowp(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                          float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out) {
  require_16bit_storage(storage, "linear_backward_lowp");
  if (ctx.device.is_cuda()) linear_backward_lowp_cuda(ctx, storage, dY, X, W, dX, dW, db, T, in, out);
  else linear_backward_lowp_cpu(ctx, storage, dY, X, W, dX, dW, db, T, in, out);
}

}  // namespace pf
