// float64 reference sum of squares over x [n].
#include "kernels/reduce/reduce.h"

namespace pf {

double sum_of_squares_ref(const double* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

}  // namespace pf
