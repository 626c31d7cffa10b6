// float64 reference GELU: Y[n] = gelu(X), dX[n] = dY * gelu'(X).
#include "kernels/gelu/gelu.h"
#include "kernels/gelu/gelu_math.h"

namespace pf {

void gelu_forward_ref(const double* X, double* Y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) Y[i] = gelu_value(X[i]);
}

void gelu_backward_ref(const double* dY, const double* X, double* dX, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dX[i] = dY[i] * gelu_derivative(X[i]);
}

}  // namespace pf
