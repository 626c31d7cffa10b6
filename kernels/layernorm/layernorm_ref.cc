// float64 reference layer norm: X [T,C] -> Y [T,C], mean/rstd [T];
// backward dX [T,C] (overwritten), dgamma/dbeta [C] (accumulated).
#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_math.h"

namespace pf {

void layernorm_forward_ref(const double* X, const double* gamma, const double* beta, double* Y, double* mean,
                           double* rstd, int64_t T, int64_t C, double eps) {
  for (int64_t t = 0; t < T; ++t) {
    const double* x = X + t * C;
    double m = 0.0;
    for (int64_t c = 0; c < C; ++c) m += x[c];
    m /= static_cast<double>(C);
    double var = 0.0;
    for (int64_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<double>(C);
    const double r = layernorm_rstd(var, eps);
    for (int64_t c = 0; c < C; ++c) Y[t * C + c] = layernorm_output(x[c], m, r, gamma[c], beta[c]);
    mean[t] = m;
    rstd[t] = r;
  }
}

void layernorm_backward_ref(const double* dY, const double* X, const double* gamma, const double* mean,
                            const double* rstd, double* dX, double* dgamma, double* dbeta, int64_t T, int64_t C) {
  for (int64_t t = 0; t < T; ++t) {
    const double* x = X + t * C;
    const double* dy = dY + t * C;
    double sg = 0.0, sgx = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - mean[t]) * rstd[t];
      sg += dy[c] * gamma[c];
      sgx += dy[c] * gamma[c] * xhat;
      dgamma[c] += dy[c] * xhat;
      dbeta[c] += dy[c];
    }
    const double mg = sg / static_cast<double>(C), mgx = sgx / static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c)
      dX[t * C + c] = layernorm_input_grad(dy[c], x[c], gamma[c], mean[t], rstd[t], mg, mgx);
  }
}

}  // namespace pf
