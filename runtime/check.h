// One template for every check macro (CUDA, cuBLAS, NCCL, MPI, HDF5, plain
// conditions). PF_CHECK_GEN evaluates `stmt` once; when `ok(status)` is false it
// throws `ErrType` with the statement text, `describe(status)`, function,
// file:line and rank. The library-specific macros live beside their headers:
// runtime/cuda_check.cuh (CUDA, cuBLAS), runtime/comm_nccl.cuh (NCCL),
// data/h5.h (HDF5); PF_MPI_CHECK is below.
#pragma once

#include <sstream>
#include <string>

#include "runtime/errors.h"

#define PF_CHECK_GEN(ErrType, stmt, ok, describe)                                                  \
  do {                                                                                             \
    auto pf_status_ = (stmt);                                                                      \
    if (!(ok(pf_status_))) {                                                                       \
      ErrType pf_err_(::pf::check_failure_message(ErrType("").kind(), #stmt, describe(pf_status_), \
                                                  __func__, __FILE__, __LINE__));                  \
      throw pf_err_;                                                                               \
    }                                                                                              \
  } while (0)

// PF_REQUIRE(ErrType, cond, message-stream): a plain precondition with context.
//   PF_REQUIRE(pf::ValueError, n > 0, "n must be positive, got " << n);
#define PF_REQUIRE(ErrType, cond, msg)                                                         \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::ostringstream pf_os_;                                                               \
      pf_os_ << msg;                                                                           \
      throw ErrType(::pf::check_failure_message(ErrType("").kind(), #cond, pf_os_.str(),       \
                                                __func__, __FILE__, __LINE__));                \
    }                                                                                          \
  } while (0)

#define PF_MPI_CHECK(stmt) \
  PF_CHECK_GEN(::pf::MpiError, stmt, [](int s) { return s == 0; }, ::pf::mpi_error_string)

namespace pf {
// Text of an MPI error code (MPI_Error_string); defined in errors.cc.
std::string mpi_error_string(int code);
}  // namespace pf
