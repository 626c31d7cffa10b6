// OpenMP layer norm on ctx.stream: X [T,C] -> Y [T,C], mean/rstd [T]. Rows are independent
// (one row per iteration, statistics in double with SIMD partial sums, whose
// order is fixed by the build, not by the thread count). The backward computes dX row
// by row, then dgamma/dbeta [C] as fp32 sums over fixed chunks of rows added in
// chunk order in double (deterministic for any thread count).
#include <vector>

#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_math.h"

namespace pf {
namespace {

constexpr int64_t kNormRowChunk = 256;

}  // namespace

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
    // dgamma, dbeta: fp32 partial column sums over fixed chunks of kNormRowChunk
    // rows (contiguous reads), then the chunks added in order in double.
    const int64_t chunks = (T + kNormRowChunk - 1) / kNormRowChunk;
    std::vector<float> partial(static_cast<size_t>(2 * chunks * C));
#pragma omp parallel for schedule(static) if (T * C > 32768)
    for (int64_t k = 0; k < chunks; ++k) {
      float* pg = partial.data() + 2 * k * C;
      float* pb = pg + C;
      for (int64_t c = 0; c < C; ++c) pg[c] = 0.f, pb[c] = 0.f;
      const int64_t t1 = (k + 1) * kNormRowChunk < T ? (k + 1) * kNormRowChunk : T;
      for (int64_t t = k * kNormRowChunk; t < t1; ++t) {
        const float m = mean[t], r = rstd[t];
        const float* x = X + t * C;
        const float* dy = dY + t * C;
        for (int64_t c = 0; c < C; ++c) {
          pg[c] += dy[c] * ((x[c] - m) * r);
          pb[c] += dy[c];
        }
      }
    }
#pragma omp parallel for schedule(static) if (chunks * C > 32768)
    for (int64_t c = 0; c < C; ++c) {
      double sg = 0.0, sb = 0.0;
      for (int64_t k = 0; k < chunks; ++k) {
        sg += partial[static_cast<size_t>(2 * k * C + c)];
        sb += partial[static_cast<size_t>((2 * k + 1) * C + c)];
      }
      dgamma[c] += static_cast<float>(sg);
      dbeta[c] += static_cast<float>(sb);
    }
  });
}

}  // namespace pf
