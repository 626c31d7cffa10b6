// Linear layer on token rows, PyTorch weight layout.
//   X [T, in], W [out, in], b [out] (may be null), Y [T, out]
//   forward:  Y = X W^T + b                         (Y is overwritten)
//   backward: dX = dY W                             (overwritten; skipped when dX is null)
//             dW += dY^T X                          (accumulated: gradient buffers
//             db += sum over rows of dY              sum over micro-batches; skipped when db is null)
// The GEMMs go through gemm_f32 (oneDNN/OpenBLAS or cuBLAS); the bias
// broadcast and the bias gradient are deterministic (fixed summation order).
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

void linear_forward(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                    int64_t in, int64_t out);
void linear_backward(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int64_t T, int64_t in, int64_t out);

void linear_forward_cpu(const float* X, const float* W, const float* b, float* Y, int64_t T, int64_t in, int64_t out);
void linear_backward_cpu(const float* dY, const float* X, const float* W, float* dX, float* dW, float* db, int64_t T,
                         int64_t in, int64_t out);
void linear_forward_cuda(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                         int64_t in, int64_t out);
void linear_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX,
                          float* dW, float* db, int64_t T, int64_t in, int64_t out);

// float64 reference with the same conventions (dW, db accumulated).
void linear_forward_ref(const double* X, const double* W, const double* b, double* Y, int64_t T, int64_t in,
                        int64_t out);
void linear_backward_ref(const double* dY, const double* X, const double* W, double* dX, double* dW, double* db,
                         int64_t T, int64_t in, int64_t out);

}  // namespace pf
