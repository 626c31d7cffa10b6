// PF_NCCL_CHECK, instantiated from PF_CHECK_GEN like the CUDA and cuBLAS
// macros. Included only by .cu files (nccl.h needs the CUDA toolkit).
#pragma once

#include <nccl.h>

#include <string>

#include "runtime/check.h"

namespace pf {
inline std::string nccl_error_text(ncclResult_t r) {
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}
}  // namespace pf

#define PF_NCCL_CHECK(stmt) \
  PF_CHECK_GEN(             \
      ::pf::NcclError, stmt, [](ncclResult_t r) { return r == ncclSuccess; }, ::pf::nccl_error_text)
