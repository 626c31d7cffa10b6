// Dispatch of the AdamW update by ctx.device; the clipping coefficient.
#include "kernels/adamw/adamw.h"

#include "runtime/check.h"

namespace pf {

void adamw_update(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                  int64_t step, const AdamWConfig& cfg, float grad_scale) {
  PF_REQUIRE(ValueError, step >= 1, "adamw_update: step must be >= 1 (1-based), got " << step);
  if (ctx.device.is_cuda()) adamw_update_cuda(ctx, params, grads, m, v, n, step, cfg, grad_scale);
  else adamw_update_cpu(ctx, params, grads, m, v, n, step, cfg, grad_scale);
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

}  // namespace pf
