// Row-major GEMM: C[M,N] = alpha * op(A) @ op(B) + beta * C, where op(A) is
// [M,K] (A stored [M,K], or [K,M] when trans_a) and op(B) is [K,N] (B stored
// [K,N], or [N,K] when trans_b). Leading dimensions are row strides.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"

namespace pf {

// Dispatching fp32 GEMM: oneDNN/OpenBLAS on the CPU, cuBLAS (ctx.blas, on
// ctx.stream) on CUDA. Pointers live on ctx.device.
void gemm_f32(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_f32_cuda(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// 16-bit operands (f16 or bf16 words, `storage`), fp32 C and fp32
// accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F: tensor cores on sm_70+).
void gemm_lowp_cuda(const ExecContext& ctx, DType storage, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                    int64_t ldc);

enum class GemmBackend { OneDNN, OpenBLAS };

// The CPU sgemm this build uses (oneDNN when found at build time).
GemmBackend cpu_gemm_backend();
const char* gemm_backend_name(GemmBackend b);

// fp32 on ctx.stream, OpenMP-threaded by the library.
void gemm_f32_cpu(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The host sgemm itself (cpu_gemm_backend()), run on the calling thread outside
// any stream: the building block of CPU kernels whose work already runs on
// ctx.stream, also on their OpenMP threads (which are not the stream's worker:
// a gemm_f32_cpu(ctx, ...) there would be queued instead of run), and of host
// code that owns no stream.
void gemm_f32_host(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// Same through a chosen backend (for benchmarks that compare them).
void gemm_f32_cpu_with(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// float64 dot product of a[0, n) and b[0, n), summed in order (references, tests).
inline double dot_f64_ref(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}
// float64 reference: plain loops, no BLAS.
void gemm_f64_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

}  // namespace pf
