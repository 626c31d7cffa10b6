// CPU linear layer on ctx.stream: X [T,in], W [out,in], b [out], Y [T,out]. The
// GEMMs use gemm_f32_cpu (oneDNN/OpenBLAS, threaded by the library; called from
// the stream's work with the same ctx, it runs inline); the bias broadcast
// is an OpenMP loop and the bias gradient is the column sums of
// column_sums_cpu.h (deterministic for any thread count).
#include "kernels/gemm/gemm.h"
#include "kernels/linear/linear.h"
#include "kernels/reduce/column_sums_cpu.h"

namespace pf {

void linear_forward_cpu(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                        int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  host_launch(ctx, [=] {
    if (b) {
#pragma omp parallel for schedule(static) if (T * out > 65536)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) Y[t * out + o] = b[o];
    }
    gemm_f32_cpu(ctx, false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
  });
}

void linear_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                         float* db, int64_t T, int64_t in, int64_t out) {
  if (T == 0) return;
  host_launch(ctx, [=] {
    if (dX) gemm_f32_cpu(ctx, false, false, T, in, out, 1.0f, dY, out, W, in, 0.0f, dX, in);
    gemm_f32_cpu(ctx, true, false, out, in, T, 1.0f, dY, out, X, in, 1.0f, dW, in);
    if (db) {
      // Column sums in the fixed chunks of column_sums_cpu.h.
      float* const sums[1] = {db};
      column_sums_cpu::add_column_sums<1>(
          [=](int64_t t, float* const(&acc)[1]) {
            for (int64_t o = 0; o < out; ++o) acc[0][o] += dY[t * out + o];
          },
          sums, T, out);
    }
  });
}

}  // namespace pf
