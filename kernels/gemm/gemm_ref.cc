// float64 reference GEMM, the yardstick for every fp32 GEMM-shaped kernel.
#include "kernels/gemm/gemm.h"

namespace pf {

void gemm_f64_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      double& c = C[i * ldc + j];
      c = alpha * acc + (beta == 0.0 ? 0.0 : beta * c);
    }
}

}  // namespace pf
