// Per-element math of the feature maps (feature_map.h), shared by the float64
// reference (T = double), the CPU backend and the CUDA row kernels (T = float),
// so the backends cannot drift.
//   u = w_l . x (one entry of x W^T), h = |x|^2 / 2, c = max_l (u_l - h)
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/hd.h"
#include "runtime/vector_math.h"

namespace pf {

// exp(v) for v <= 0 in fp32 (the FAVOR+ exponents e - c are never positive):
// exp_f32 (runtime/vector_math.h), without a library call so that the CPU
// loops vectorise; the CUDA feature-map kernels and the fused FAVOR+ kernels
// in fp32 run the same code, so the backends agree (the fused kernels on
// tensor cores use the special-function unit instead: favor_attention_cuda_tiles.cuh). Relative
// error below 3e-7 (tested); v < -87.33 (results below 2^-126, negligible
// next to the row maximum 1) and -inf give 0; NaN propagates.
PF_HD float fm_exp_nonpos(float v) { return exp_f32(v); }
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

// elu(u) + 1: u + 1 for u > 0, exp(u) in (0, 1] otherwise (the exponent
// clamped to <= 0 so that the vectorised exponential sees its own range).
template <typename T>
PF_HD T elu_feature(T u) {
  return u > T(0) ? u + T(1) : fm_exp_nonpos(u < T(0) ? u : T(0));
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
// Elu from its feature phi = elu(u) + 1: elu'(u) = 1 where phi > 1 (u > 0),
// phi itself otherwise (exp(u)); at u = 0 both are 1.
template <typename T>
PF_HD T elu_grad_weight(T g, T phi) {
  return g * (phi > T(1) ? T(1) : phi);
}

}  // namespace pf
