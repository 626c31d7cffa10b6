// PF_NCCL_CHECK, instantiated from PF_CHECK_GEN like the CUDA and cuBLAS
// macros. Included only by .cu files (nccl.h needs the CUDA toolkit).
#pragma once

#include <nccl.h>

#include <string>

#include "runtime/check.h"

// NCCL 2.12 or newer (cmake/cuda.cmake checks it too); ncclGetLastError came
// with 2.13, ncclCommSplit with 2.18.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 12, 0)
#error "NCCL 2.12 or newer is needed"
#endif
#define PF_NCCL_HAS_LAST_ERROR (NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0))
#define PF_NCCL_HAS_COMM_SPLIT (NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0))

namespace pf {
inline std::string nccl_error_text(ncclResult_t r) {
  std::string text = ncclGetErrorString(r);
#if PF_NCCL_HAS_LAST_ERROR
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) text += std::string(" (") + last + ")";
#endif
  return text;
}
}  // namespace pf

#define PF_NCCL_CHECK(stmt) \
  PF_CHECK_GEN(             \
      ::pf::NcclError, stmt, [](ncclResult_t r) { return r == ncclSuccess; }, ::pf::nccl_error_text)
