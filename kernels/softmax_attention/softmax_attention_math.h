// Per-element math of softmax attention shared by the CPU and CUDA kernels:
// the causal and window mask, exp of a non-positive shifted score, the online-softmax
// rescale factor, the row log-sum-exp, and the score gradient
// dS_ij = P_ij (dP_ij - D_i). Scalars only; no shapes.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#include "runtime/hd.h"
#include "runtime/vector_math.h"

namespace pf {

// Which keys query i sees, of n: j <= i when causal, and with a window w > 0
// only those with |i - j| < w (causal: the w keys i - w + 1 .. i). Every
// query sees at least itself.
struct SoftmaxMask {
  bool causal = false;
  int64_t window = 0;  // 0: no window

  PF_HD bool visible(int64_t i, int64_t j) const {
    return (!causal || j <= i) && (window <= 0 || (j > i - window && j < i + window));
  }
  // The visible keys of query i are [first_key(i), end_key(i, n)).
  PF_HD int64_t first_key(int64_t i) const { return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0; }
  PF_HD int64_t end_key(int64_t i, int64_t n) const {
    const int64_t e = causal ? i + 1 : (window > 0 ? i + window : n);
    return e < n ? e : n;
  }
  // The queries that see key j are [first_query(j), end_query(j, n)).
  PF_HD int64_t first_query(int64_t j) const {
    const int64_t f = causal ? j : (window > 0 ? j - window + 1 : 0);
    return f > 0 ? f : 0;
  }
  PF_HD int64_t end_query(int64_t j, int64_t n) const { return window > 0 && j + window < n ? j + window : n; }
  // Whether every key of [j_first, j_last] is visible to every query of
  // [i_first, i_last] (visible() holds at the rectangle's corners that
  // bound it, so everywhere in it): a tile that needs no per-element mask.
  PF_HD bool all_visible(int64_t i_first, int64_t i_last, int64_t j_first, int64_t j_last) const {
    return (!causal || j_last <= i_first) && (window <= 0 || (j_first > i_last - window && j_last < i_first + window));
  }
  // The visible columns [*c0, *c1) of the key tile [j0, j0 + cols) for query
  // i, relative to j0 (*c0 == *c1 when none is).
  PF_HD void tile_span(int64_t i, int64_t j0, int64_t cols, int64_t n, int64_t* c0, int64_t* c1) const {
    int64_t a = first_key(i) - j0, b = end_key(i, n) - j0;
    a = a < 0 ? 0 : (a > cols ? cols : a);
    b = b < a ? a : (b > cols ? cols : b);
    *c0 = a;
    *c1 = b;
  }
};

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
