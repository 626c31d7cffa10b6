// OpenMP GELU over a flat buffer of n floats, on ctx.stream: Y = gelu(X), dX = dY * gelu'(X).
// The loops are compiled per instruction set (PF_VECTOR_CLONES) and use the
// vectorisable exp of gelu_exp.
#include <algorithm>

#include "kernels/gelu/gelu.h"
#include "kernels/gelu/gelu_math.h"

namespace pf {
namespace {

constexpr int64_t kBlock = 16384;

PF_VECTOR_CLONES
void gelu_block(const float* X, float* Y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) Y[i] = gelu_value(X[i]);
}

PF_VECTOR_CLONES
void gelu_grad_block(const float* dY, const float* X, float* dX, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dX[i] = dY[i] * gelu_derivative(X[i]);
}

}  // namespace

void gelu_forward_cpu(const ExecContext& ctx, const float* X, float* Y, int64_t n) {
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static) if (n > kBlock)
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) gelu_block(X + i0, Y + i0, std::min(kBlock, n - i0));
  });
}

void gelu_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n) {
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static) if (n > kBlock)
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) gelu_grad_block(dY + i0, X + i0, dX + i0, std::min(kBlock, n - i0));
  });
}

}  // namespace pf
