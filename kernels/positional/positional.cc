#include "kernels/positional/positional.h"

#include "kernels/positional/positional_math.h"

namespace pf {

void sinusoidal_add(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset) {
  if (ctx.device.is_cuda()) sinusoidal_add_cuda(ctx, x, B, n, C, offset);
  else sinusoidal_add_cpu(ctx, x, B, n, C, offset);
}

void sinusoidal_add_cpu(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset) {
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const float pe = sinusoidal_value(offset + i, c, C);
        for (int64_t b = 0; b < B; ++b) x[(b * n + i) * C + c] += pe;
      }
  });
}

}  // namespace pf
