// Per-element math of the feature maps (feature_map.h), shared by the float64
// reference (T = double), the CPU backend and the CUDA row kernels (T = float),
// so the backends cannot drift.
//   u = w_l . x (one entry of x W^T), h = |x|^2 / 2, c = max_l (u_l - h)
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/hd.h"

namespace pf {

// exp(v) for v <= 0 in fp32 (the FAVOR+ exponents e - c are never positive),
// without a library call so that the CPU loops vectorise; CUDA runs the same
// code, so the backends agree. Cephes expf: v = n ln2 + r with |r| <= ln2/2,
// a degree-7 polynomial in r, 2^n from exponent bits. Relative error below
// 3e-7 (tested); v < -87.33 (results below 2^-126, negligible next to the row
// maximum 1) and -inf give 0; NaN propagates.
PF_HD float fm_exp_nonpos(float v) {
  constexpr float kLo = -87.33654f, kLog2e = 1.44269504088896341f, kRound = 12582912.0f;  // 1.5 * 2^23
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;  // ln2 = kC1 + kC2 (kC1 exact in 9 bits)
  // Values below kLo compute garbage that a bit mask clears at the end: a
  // branch-free form, so that compilers keep the loop vectorised.
  const float t = v * kLog2e + kRound;  // round(v log2e) lands in the low mantissa bits of t
  const float nf = t - kRound;
  const float r = (v - nf * kC1) - nf * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof(tb));
  const uint32_t sb = (tb + (127u - 0x4B400000u)) << 23;  // 2^n for n in [-126, 0]
  float scale;
  memcpy(&scale, &sb, sizeof(scale));
  const float result = y * scale;
  uint32_t rb;
  memcpy(&rb, &result, sizeof(rb));
  rb &= !(v < kLo) ? 0xFFFFFFFFu : 0u;  // keeps NaN (the comparison is false), clears v < kLo and -inf
  float out;
  memcpy(&out, &rb, sizeof(out));
  return out;
}
PF_HD double fm_exp_nonpos(double v) { return exp(v); }

// FAVOR+ exponent e = w.x - |x|^2/2.
template <typename T>
PF_HD T favor_exponent(T u, T half_sq_norm) {
  return u - half_sq_norm;
}

// FAVOR+ feature relative to the row log-scale c: m^(-1/2) exp(e - c), with
// e <= c, so the result lies in [0, m^(-1/2)].
template <typename T>
PF_HD T favor_feature(T e, T c, T inv_sqrt_m) {
  return inv_sqrt_m * fm_exp_nonpos(e - c);
}

// Generalized (ReLU) kernel feature relu(u) + eps.
template <typename T>
PF_HD T relu_feature(T u, T eps) {
  return (u > T(0) ? u : T(0)) + eps;
}

// Backward weights t_l, with dx = W^T t - (softmax only) x sum_l t_l.
template <typename T>
PF_HD T favor_grad_weight(T g, T phi) {
  return g * phi;
}
template <typename T>
PF_HD T relu_grad_weight(T g, bool active) {
  return active ? g : T(0);
}

}  // namespace pf
