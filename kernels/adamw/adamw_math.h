// AdamW (decoupled weight decay, Loshchilov & Hutter) per-element update shared
// by the reference, CPU and CUDA kernels. With g = grad * grad_scale:
//   m = beta1 m + (1 - beta1) g,       v = beta2 v + (1 - beta2) g^2
//   p -= lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p )
// where bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (t = 1 on the first step).
#pragma once

#include <cmath>

#include "runtime/hd.h"

namespace pf {

template <typename F>
PF_HD void adamw_element(F& p, F g, F& m, F& v, F lr, F beta1, F beta2, F eps, F weight_decay, F bc1, F bc2) {
  m = beta1 * m + (F(1) - beta1) * g;
  v = beta2 * v + (F(1) - beta2) * g * g;
  const F mhat = m / bc1, vhat = v / bc2;
  p -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p);
}

}  // namespace pf
