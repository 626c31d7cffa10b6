// Dispatch of the layer-norm kernels by ctx.device.
#include "kernels/layernorm/layernorm.h"

namespace pf {

void layernorm_forward(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                       float* mean, float* rstd, int64_t T, int64_t C, float eps) {
  if (ctx.device.is_cuda()) layernorm_forward_cuda(ctx, X, gamma, beta, Y, mean, rstd, T, C, eps);
  else layernorm_forward_cpu(ctx, X, gamma, beta, Y, mean, rstd, T, C, eps);
}

void layernorm_backward(const ExecContext& ctx, const float* dY, const float* X, const float* gamma, const float* mean,
                        const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T, int64_t C) {
  if (ctx.device.is_cuda()) layernorm_backward_cuda(ctx, dY, X, gamma, mean, rstd, dX, dgamma, dbeta, T, C);
  else layernorm_backward_cpu(ctx, dY, X, gamma, mean, rstd, dX, dgamma, dbeta, T, C);
}

}  // namespace pf
