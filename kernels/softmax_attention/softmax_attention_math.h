// Per-element math of softmax attention shared by the CPU and CUDA kernels:
// the causal mask, exp of a non-positive shifted score, the online-softmax
// rescale factor, the row log-sum-exp, and the score gradient
// dS_ij = P_ij (dP_ij - D_i). Scalars only; no shapes.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#include "runtime/hd.h"
#include "runtime/vector_math.h"

namespace pf {

// Key j is visible from query i.
PF_HD bool softmax_visible(bool causal, int64_t i, int64_t j) { return !causal || j <= i; }

// Number of visible keys among [j0, j0 + cols) for query i (0 when all masked).
PF_HD int64_t softmax_visible_count(bool causal, int64_t i, int64_t j0, int64_t cols) {
  if (!causal) return cols;
  const int64_t v = i - j0 + 1;
  return v < 0 ? 0 : (v > cols ? cols : v);
}

// exp(x) for x <= ln(2)/2 (a score minus its row max or its log-sum-exp,
// which rounding may leave slightly positive), relative error ~2e-7 (Cephes
// polynomial); exactly 0 for x < -87.3, -inf included.
// No float compares: the upper clamp is x - relu(x - 0.34) with
// relu(v) = (v + |v|) / 2 (exact when nothing is clamped) and the underflow
// is a bit mask from an integer compare, so the CPU loops that call this
// vectorise (GCC keeps a float select as a branch).
PF_HD float softmax_exp(float x) {
  // As unsigned, exactly the floats below -87.3 (and -inf, and negative NaNs)
  // have patterns above that of -87.3.
  const uint32_t keep = 0u - static_cast<uint32_t>(f32_bits(x) <= 0xC2AE999Au);
  const float d = x - 0.34f;
  const float xc = x - 0.5f * (d + fabsf(d));
  // For x < -87.3 the core's result is garbage (or NaN came through): masked to 0.
  return bits_f32(f32_bits(exp_core_f32(xc)) & keep);
}

// Online softmax: factor that rescales the running sum and output when the row
// max moves from m_old to m_new >= m_old (0 when nothing was accumulated yet).
PF_HD float softmax_rescale(float m_old, float m_new) { return m_old == m_new ? 1.f : softmax_exp(m_old - m_new); }

// Row log-sum-exp from the running max m and sum l (l >= 1 whenever a key is
// visible; every row sees at least key 0 in causal mode, any key otherwise).
PF_HD float softmax_lse(float m, float l) { return m + logf(l); }

// Gradient of the scaled score: dS_ij = scale * P_ij (dP_ij - D_i), with
// D_i = dO_i . O_i and dP_ij = dO_i . v_j.
PF_HD float softmax_score_grad(float p, float dp, float D, float scale) { return scale * p * (dp - D); }

}  // namespace pf
