// Softmax cross-entropy per-element math shared by the reference, CPU and CUDA
// kernels. For a row of logits l [V] with m = max(l) and s = sum exp(l - m):
//   loss     = (m - l[target]) + log(s)          (max-subtracted log-sum-exp)
//   dlogit_j = (exp(l_j - m) / s - [j == target]) * scale
#pragma once

#include <cmath>

#include "runtime/hd.h"

namespace pf {

constexpr int kIgnoreTarget = -1;

template <typename F>
PF_HD F cross_entropy_token_loss(F row_max, F sum_exp, F target_logit) {
  return (row_max - target_logit) + std::log(sum_exp);
}

template <typename F>
PF_HD F cross_entropy_logit_grad(F logit, F row_max, F inv_sum_exp, bool is_target, F scale) {
  return (std::exp(logit - row_max) * inv_sum_exp - (is_target ? F(1) : F(0))) * scale;
}

}  // namespace pf
