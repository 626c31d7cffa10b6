// GELU, tanh approximation (as GPT-2): per-element value and derivative,
// shared by the float64 reference, the CPU kernel and the CUDA kernel.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// Evaluated through the identities 0.5 (1 + tanh(u)) = s = 1 / (1 + exp(-2u))
// and 1 - tanh(u)^2 = 4 s (1 - s), with 1 - s = exp(-2u) s: the same
// function without the cancellation of 1 + tanh(u) for negative x (which
// costs fp32 most of its digits there), and finite for any finite x.
#pragma once

#include <cmath>

#include "runtime/hd.h"
#include "runtime/vector_math.h"

namespace pf {

// exp for the GELU: the float64 reference and CUDA take the library's; the
// CPU's fp32 loops take exp_f32, which vectorises (runtime/vector_math.h).
PF_HD double gelu_exp(double v) { return exp(v); }
PF_HD float gelu_exp(float v) {
#if defined(__CUDA_ARCH__)
  return expf(v);
#else
  return exp_f32(v);
#endif
}

template <typename F>
PF_HD F gelu_inner(F x) {
  return F(0.7978845608028654) * (x + F(0.044715) * x * x * x);  // sqrt(2/pi) (x + 0.044715 x^3)
}

template <typename F>
PF_HD F gelu_value(F x) {
  return x / (F(1) + gelu_exp(F(-2) * gelu_inner(x)));
}

template <typename F>
PF_HD F gelu_derivative(F x) {
  const F e = gelu_exp(F(-2) * gelu_inner(x));
  const F s = F(1) / (F(1) + e);                       // 0.5 (1 + tanh(u))
  const F sm = e < F(INFINITY) ? e * s : F(1);         // 0.5 (1 - tanh(u)) = e / (1 + e)
  const F ssm = s * sm;  // 0 once |u| is large; skip the term so x^2 overflow gives no 0 * inf
  return ssm == F(0) ? s : s + F(2) * x * ssm * F(0.7978845608028654) * (F(1) + F(3 * 0.044715) * x * x);
}

}  // namespace pf
