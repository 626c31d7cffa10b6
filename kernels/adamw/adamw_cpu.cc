// OpenMP AdamW over a flat fp32 buffer, on ctx.stream: params, grads, m, v [n],
// updated in place.
#include <cmath>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/adamw_math.h"

namespace pf {

void adamw_update_cpu(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                      int64_t step, const AdamWConfig& cfg, float grad_scale) {
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(step)));
  host_launch(ctx, [=] {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      adamw_element(params[i], grads[i] * grad_scale, m[i], v[i], cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                    cfg.weight_decay, bc1, bc2);
  });
}

}  // namespace pf
