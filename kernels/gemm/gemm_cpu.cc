// CPU sgemm through oneDNN (run-time ISA dispatch) or OpenBLAS's CBLAS; gemm_f32_cpu runs it on ctx.stream.
#include <cblas.h>

#include "kernels/gemm/gemm.h"
#include "runtime/check.h"
#ifdef PF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace pf {

GemmBackend cpu_gemm_backend() {
#ifdef PF_HAVE_DNNL
  return GemmBackend::OneDNN;
#else
  return GemmBackend::OpenBLAS;
#endif
}

const char* gemm_backend_name(GemmBackend b) { return b == GemmBackend::OneDNN ? "onednn" : "openblas"; }

void gemm_f32_cpu_with(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (backend == GemmBackend::OneDNN) {
#ifdef PF_HAVE_DNNL
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                        beta, C, ldc);
    PF_REQUIRE(ValueError, st == dnnl_success,
               "dnnl_sgemm failed (status " << static_cast<int>(st) << ") for M=" << M << " N=" << N << " K=" << K
                                            << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc);
    return;
#else
    PF_REQUIRE(ValueError, false, "this build has no oneDNN");
#endif
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

void gemm_f32_host(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_f32_cpu_with(cpu_gemm_backend(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_f32_cpu(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  host_launch(ctx, [=] { gemm_f32_host(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); });
}

}  // namespace pf
