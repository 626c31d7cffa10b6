// OpenMP residual add on ctx.stream: out[n] = a + b (aliasing allowed).
#include "kernels/residual/residual.h"

namespace pf {

void residual_add_cpu(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n) {
  host_launch(ctx, [=] {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  });
}

}  // namespace pf
