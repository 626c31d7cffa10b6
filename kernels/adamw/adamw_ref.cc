// float64 reference AdamW over a flat buffer: params, grads, m, v [n].
#include <cmath>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/adamw_math.h"

namespace pf {

void adamw_update_ref(double* params, const double* grads, double* m, double* v, int64_t n, int64_t step,
                      const AdamWConfig& cfg, double grad_scale) {
  const double b1 = cfg.beta1, b2 = cfg.beta2;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step)), bc2 = 1.0 - std::pow(b2, static_cast<double>(step));
  for (int64_t i = 0; i < n; ++i)
    adamw_element<double>(params[i], grads[i] * grad_scale, m[i], v[i], cfg.lr, b1, b2, cfg.eps, cfg.weight_decay, bc1,
                          bc2);
}

}  // namespace pf
