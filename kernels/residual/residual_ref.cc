// float64 reference residual add: out[n] = a + b.
#include "kernels/residual/residual.h"

namespace pf {

void residual_add_ref(const double* a, const double* b, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace pf
