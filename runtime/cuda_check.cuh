// CUDA, cuBLAS and NCCL check macros, instantiated from PF_CHECK_GEN. Included
// only by .cu files and the NCCL communicator.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "runtime/check.h"

namespace pf {
inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}
inline std::string cublas_error_text(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s);
}
}  // namespace pf

#define PF_CUDA_CHECK(stmt) \
  PF_CHECK_GEN(::pf::CudaError, stmt, [](cudaError_t e) { return e == cudaSuccess; }, ::pf::cuda_error_text)
#define PF_CUBLAS_CHECK(stmt)                                                                     \
  PF_CHECK_GEN(::pf::CublasError, stmt, [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }, \
               ::pf::cublas_error_text)
// Checks the last kernel launch.
#define PF_CUDA_CHECK_LAUNCH() PF_CUDA_CHECK(cudaGetLastError())
