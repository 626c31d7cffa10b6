// Dispatch of the whole-buffer reductions by ctx.device.
#include "kernels/reduce/reduce.h"

namespace pf {

double sum_of_squares(const ExecContext& ctx, const float* x, int64_t n) {
  if (ctx.device.is_cuda()) return sum_of_squares_cuda(ctx, x, n);
  return sum_of_squares_cpu(ctx, x, n);
}

void scale_values(const ExecContext& ctx, float* x, int64_t n, float s) {
  if (ctx.device.is_cuda()) scale_values_cuda(ctx, x, n, s);
  else scale_values_cpu(ctx, x, n, s);
}

}  // namespace pf
