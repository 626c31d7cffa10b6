// Dispatch of the whole-buffer reductions by ctx.device.
#include "kernels/reduce/reduce.h"

namespace pf {

double sum_of_squares(const ExecContext& ctx, const float* x, int64_t n) {
  if (ctx.device.is_cuda()) return sum_of_squares_cuda(ctx, x, n);
  double sum = 0;  // a host result: wait for the stream, as the CUDA twin does
  host_launch(ctx, [&sum, x, n] { sum = sum_of_squares_cpu(x, n); });
  synchronize(ctx.stream);
  return sum;
}

void scale_values(const ExecContext& ctx, float* x, int64_t n, float s) {
  if (ctx.device.is_cuda()) scale_values_cuda(ctx, x, n, s);
  else host_launch(ctx, [=] { scale_values_cpu(x, n, s); });
}

}  // namespace pf
