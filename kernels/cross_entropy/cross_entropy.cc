// Dispatch of the cross-entropy kernels by ctx.device.
#include "kernels/cross_entropy/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pf {

double log_softmax_at(const float* logits, int64_t V, int32_t target) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(logits[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(logits[v]) - mx);
  return static_cast<double>(logits[target]) - mx - std::log(sum);
}

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
