// Layer norm per-element math shared by the reference, CPU and CUDA kernels.
// Row x [C]: mean = sum(x)/C, var = sum((x-mean)^2)/C (biased),
// rstd = 1/sqrt(var + eps), xhat = (x - mean) * rstd, y = xhat * gamma + beta.
// Backward with g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
//   dgamma += sum_rows dy * xhat,  dbeta += sum_rows dy.
#pragma once

#include <cmath>

#include "runtime/hd.h"

namespace pf {

template <typename F>
PF_HD F layernorm_rstd(F var, F eps) {
  return F(1) / std::sqrt(var + eps);
}

template <typename F>
PF_HD F layernorm_output(F x, F mean, F rstd, F gamma, F beta) {
  return (x - mean) * rstd * gamma + beta;
}

// mean_g = mean over the row of dy*gamma, mean_gx = mean of dy*gamma*xhat.
template <typename F>
PF_HD F layernorm_input_grad(F dy, F x, F gamma, F mean, F rstd, F mean_g, F mean_gx) {
  const F xhat = (x - mean) * rstd;
  return rstd * (dy * gamma - mean_g - xhat * mean_gx);
}

}  // namespace pf
