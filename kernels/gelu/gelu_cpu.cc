// OpenMP GELU over a flat buffer of n floats, on ctx.stream: Y = gelu(X), dX = dY * gelu'(X).
#include "kernels/gelu/gelu.h"
#include "kernels/gelu/gelu_math.h"

namespace pf {

void gelu_forward_cpu(const ExecContext& ctx, const float* X, float* Y, int64_t n) {
  host_launch(ctx, [=] {
#pragma omp parallel for simd schedule(static) if (n > 16384)
    for (int64_t i = 0; i < n; ++i) Y[i] = gelu_value(X[i]);
  });
}

void gelu_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n) {
  host_launch(ctx, [=] {
#pragma omp parallel for simd schedule(static) if (n > 16384)
    for (int64_t i = 0; i < n; ++i) dX[i] = dY[i] * gelu_derivative(X[i]);
  });
}

}  // namespace pf
