// Per-element math of linear attention shared by the CPU and CUDA backends:
// log-scale weights, the guarded denominator, the state combine and the
// backward row vector G_i = [dO_i / den_i, -(dO_i . o_i) / den_i] (width d+1).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/hd.h"

namespace pf {

// exp(log_scale - ref); every caller passes log_scale <= ref, so the weight is
// in [0, 1] and never overflows. The empty log-scale gives exactly 0.
PF_HD float log_scale_weight(float log_scale, float ref) { return expf(log_scale - ref); }

PF_HD float guarded_denominator(float den) { return den > kDenominatorGuard ? den : kDenominatorGuard; }

PF_HD float max_log_scale(float a, float b) { return a > b ? a : b; }

// True for the empty state's log-scale (anything below half of it).
PF_HD bool is_empty_log_scale(float a) { return a <= 0.5f * kEmptyLogScale; }

// Element k of out = earlier (+) later for one head; k = 0 is the log-scale.
// Reads both inputs before writing, so out may alias either.
PF_HD void state_combine_element(const float* earlier, const float* later, float* out, int64_t k) {
  const float a = earlier[0], b = later[0];
  const float top = max_log_scale(a, b);
  if (k == 0) {
    out[0] = top;
  } else {
    out[k] = log_scale_weight(a, top) * earlier[k] + log_scale_weight(b, top) * later[k];
  }
}

// Segmented states [flag, log-scale, S] (linear_attention_segmented_state_combine):
// matrix element k >= 2 of out, then (after every matrix element, so out may
// alias) the flag and the log-scale.
PF_HD void segmented_state_element(const float* earlier, const float* later, float* out, int64_t k) {
  if (later[0] != 0.f) {
    out[k] = later[k];
    return;
  }
  const float top = max_log_scale(earlier[1], later[1]);
  out[k] = log_scale_weight(earlier[1], top) * earlier[k] + log_scale_weight(later[1], top) * later[k];
}
PF_HD void segmented_state_head(const float* earlier, const float* later, float* out) {
  const bool reset = later[0] != 0.f;
  out[1] = reset ? later[1] : max_log_scale(earlier[1], later[1]);
  out[0] = (earlier[0] != 0.f || reset) ? 1.f : 0.f;
}

// G_i for one row: g[0..d) = dO/den, g[d] = -(dO . o)/den.
PF_HD void gradient_row(int64_t d, const float* o, float den, const float* d_o, float* g) {
  const float inv = 1.0f / guarded_denominator(den);
  float dot = 0.f;
  for (int64_t k = 0; k < d; ++k) {
    dot += d_o[k] * o[k];
    g[k] = d_o[k] * inv;
  }
  g[d] = -dot * inv;
}

}  // namespace pf
