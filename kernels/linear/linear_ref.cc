// float64 reference linear layer: Y[T,out] = X[T,in] W[out,in]^T + b[out];
// dX = dY W, dW += dY^T X, db += column sums of dY. Plain loops.
#include "kernels/linear/linear.h"

namespace pf {

void linear_forward_ref(const double* X, const double* W, const double* b, double* Y, int64_t T, int64_t in,
                        int64_t out) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += X[t * in + i] * W[o * in + i];
      Y[t * out + o] = acc;
    }
}

void linear_backward_ref(const double* dY, const double* X, const double* W, double* dX, double* dW, double* db,
                         int64_t T, int64_t in, int64_t out) {
  if (dX)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < in; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < out; ++o) acc += dY[t * out + o] * W[o * in + i];
        dX[t * in + i] = acc;
      }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0.0;
      for (int64_t t = 0; t < T; ++t) acc += dY[t * out + o] * X[t * in + i];
      dW[o * in + i] += acc;
    }
    if (db) {
      double acc = 0.0;
      for (int64_t t = 0; t < T; ++t) acc += dY[t * out + o];
      db[o] += acc;
    }
  }
}

}  // namespace pf
