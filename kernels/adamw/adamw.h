// AdamW update over a flat fp32 parameter buffer and its moments.
//   params, grads, m, v [n]; step t >= 1 (the number of this update, 1-based)
//   grads are multiplied by grad_scale before use (global-norm clipping:
//   grad_scale = clip_coefficient(global_norm, max_norm)); grads are not modified.
// Parameter groups without decay (biases, layer-norm gains) are updated by a
// separate call over their sub-range with weight_decay = 0.
// Bias corrections 1 - beta^t are computed in double on the host.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

void adamw_update(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                  int64_t step, const AdamWConfig& cfg, float grad_scale = 1.0f);

void adamw_update_cpu(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                      int64_t step, const AdamWConfig& cfg, float grad_scale);
void adamw_update_cuda(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                       int64_t step, const AdamWConfig& cfg, float grad_scale);
void adamw_update_ref(double* params, const double* grads, double* m, double* v, int64_t n, int64_t step,
                      const AdamWConfig& cfg, double grad_scale);

// Gradient clipping by global norm: the factor to multiply gradients by so
// that their norm is at most max_norm (1 when already within, or when
// max_norm <= 0, which disables clipping). norm is sqrt of the global sum of
// squares (see kernels/reduce/reduce.h).
double clip_coefficient(double norm, double max_norm);

}  // namespace pf
