// OpenMP layer norm: X [T,C] -> Y [T,C], mean/rstd [T]. Rows are independent
// (one row per iteration, statistics in double). The backward computes dX row
// by row, then dgamma/dbeta [C] by column blocks summed in row order in double
// (deterministic for any thread count).
#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_math.h"

namespace pf {
namespace {

constexpr int64_t kColumnBlock = 128;

}  // namespace

void layernorm_forward_cpu(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                           int64_t T, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (T * C > 32768)
  for (int64_t t = 0; t < T; ++t) {
    const float* x = X + t * C;
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += x[c];
    const double m = s / static_cast<double>(C);
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += (x[c] - m) * (x[c] - m);
    const float mf = static_cast<float>(m);
    const float r = static_cast<float>(layernorm_rstd(ss / static_cast<double>(C), static_cast<double>(eps)));
    float* y = Y + t * C;
    for (int64_t c = 0; c < C; ++c) y[c] = layernorm_output(x[c], mf, r, gamma[c], beta[c]);
    mean[t] = mf;
    rstd[t] = r;
  }
}

void layernorm_backward_cpu(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                            float* dX, float* dgamma, float* dbeta, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static) if (T * C > 32768)
  for (int64_t t = 0; t < T; ++t) {
    const float* x = X + t * C;
    const float* dy = dY + t * C;
    const float m = mean[t], r = rstd[t];
    double sg = 0.0, sgx = 0.0;
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
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (T * C > 32768)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock, c1 = c0 + kColumnBlock < C ? c0 + kColumnBlock : C;
    double ag[kColumnBlock] = {}, ab[kColumnBlock] = {};
    for (int64_t t = 0; t < T; ++t) {
      const float m = mean[t], r = rstd[t];
      for (int64_t c = c0; c < c1; ++c) {
        const float dy = dY[t * C + c];
        ag[c - c0] += dy * ((X[t * C + c] - m) * r);
        ab[c - c0] += dy;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dgamma[c] += static_cast<float>(ag[c - c0]);
      dbeta[c] += static_cast<float>(ab[c - c0]);
    }
  }
}

}  // namespace pf
