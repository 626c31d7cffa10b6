// cuBLAS sgemm (and the 16-bit-operand GemmEx) for row-major operands: a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so the operands are swapped.
#include "kernels/gemm/gemm.h"
#include "runtime/cuda_check.cuh"

namespace pf {

void gemm_f32_cuda(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  PF_REQUIRE(CudaError, ctx.blas != nullptr, "gemm on " << ctx.device.str() << " without a cuBLAS handle");
  if (M == 0 || N == 0) return;
  PF_CUBLAS_CHECK(cublasSgemm(static_cast<cublasHandle_t>(ctx.blas), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                              static_cast<int>(K), &alpha, B, static_cast<int>(ldb), A, static_cast<int>(lda), &beta,
                              C, static_cast<int>(ldc)));
}

void gemm_lowp_cuda(const ExecContext& ctx, DType storage, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                    int64_t ldc) {
  PF_REQUIRE(CudaError, ctx.blas != nullptr, "gemm on " << ctx.device.str() << " without a cuBLAS handle");
  PF_REQUIRE(ValueError, storage == DType::f16 || storage == DType::bf16,
             "gemm_lowp_cuda: operands " << dtype_name(storage) << " are not f16 or bf16");
  if (M == 0 || N == 0) return;
  const cudaDataType_t t = storage == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  PF_CUBLAS_CHECK(cublasGemmEx(static_cast<cublasHandle_t>(ctx.blas), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                               static_cast<int>(K), &alpha, B, t, static_cast<int>(ldb), A, t, static_cast<int>(lda),
                               &beta, C, CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace pf
