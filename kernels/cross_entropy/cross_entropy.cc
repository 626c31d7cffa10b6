// Dispatch of the cross-entropy kernels by ctx.device.
#include "kernels/cross_entropy/cross_entropy.h"

namespace pf {

CrossEntropySums cross_entropy_forward(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                       float* losses, int64_t T, int64_t V) {
  if (ctx.device.is_cuda()) return cross_entropy_forward_cuda(ctx, logits, targets, losses, T, V);
  return cross_entropy_forward_cpu(ctx, logits, targets, losses, T, V);
}

void cross_entropy_backward(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                            int64_t T, int64_t V, float scale) {
  if (ctx.device.is_cuda()) cross_entropy_backward_cuda(ctx, logits, targets, dlogits, T, V, scale);
  else cross_entropy_backward_cpu(ctx, logits, targets, dlogits, T, V, scale);
}

}  // namespace pf
