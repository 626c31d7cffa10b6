// OpenMP layer norm on ctx.stream: X [T,C] -> Y [T,C], mean/rstd [T]. Rows are independent
// (one row per iteration, statistics in double with SIMD partial sums, whose
// order is fixed by the build, not by the thread count). The backward computes dX row
// by row, then dgamma/dbeta [C] as the column sums of column_sums_cpu.h (fp32
// over fixed chunks of rows, the chunks added in order in double:
// deterministic for any thread count).
#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_math.h"
#include "kernels/reduce/column_sums_cpu.h"

namespace pf {

void layernorm_forward_cpu(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                           float* mean, float* rstd, int64_t T, int64_t C, float eps) {
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static) if (T * C > 32768)
    for (int64_t t = 0; t < T; ++t) {
      const float* x = X + t * C;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += x[c];
      const double m = s / static_cast<double>(C);
      double ss = 0.0;
#pragma omp simd reduction(+ : ss)
      for (int64_t c = 0; c < C; ++c) ss += (x[c] - m) * (x[c] - m);
      const float mf = static_cast<float>(m);
      const float r = static_cast<float>(layernorm_rstd(ss / static_cast<double>(C), static_cast<double>(eps)));
      float* y = Y + t * C;
      for (int64_t c = 0; c < C; ++c) y[c] = layernorm_output(x[c], mf, r, gamma[c], beta[c]);
      mean[t] = mf;
      rstd[t] = r;
    }
  });
}

void layernorm_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, const float* gamma,
                            const float* mean, const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T,
                            int64_t C) {
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static) if (T * C > 32768)
    for (int64_t t = 0; t < T; ++t) {
      const float* x = X + t * C;
      const float* dy = dY + t * C;
      const float m = mean[t], r = rstd[t];
      double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
      for (int64_t c = 0; c < C; ++c) {
        const float g = dy[c] * gamma[c];
        sg += g;
        sgx += g * ((x[c] - m) * r);
      }
      const float mg = static_cast<float>(sg / static_cast<double>(C));
      const float mgx = static_cast<float>(sgx / static_cast<double>(C));
      float* dx = dX + t * C;
      for (int64_t c = 0; c < C; ++c) dx[c] = layernorm_input_grad(dy[c], x[c], gamma[c], m, r, mg, mgx);
    }
    // dgamma, dbeta: column sums in the fixed chunks of column_sums_cpu.h.
    float* const out[2] = {dgamma, dbeta};
    column_sums_cpu::add_column_sums<2>(
        [=](int64_t t, float* const(&acc)[2]) {
          const float m = mean[t], r = rstd[t];
          const float* x = X + t * C;
          const float* dy = dY + t * C;
          for (int64_t c = 0; c < C; ++c) {
            acc[0][c] += dy[c] * ((x[c] - m) * r);
            acc[1][c] += dy[c];
          }
        },
        out, T, C);
  });
}

}  // namespace pf
