// Linear layer on token rows, PyTorch weight layout.
//   X [T, in], W [out, in], b [out] (may be null), Y [T, out]
//   forward:  Y = X W^T + b                         (Y is overwritten)
//   backward: dX = dY W                             (overwritten; skipped when dX is null)
//             dW += dY^T X                          (accumulated: gradient buffers
//             db += sum over rows of dY              sum over micro-batches; skipped when db is null)
// The GEMMs go through gemm_f32 (oneDNN/OpenBLAS or cuBLAS); the bias
// broadcast and the bias gradient are deterministic (fixed summation order).
// On CUDA the bias gradient takes its partial sums (column_sums_scratch_bytes)
// from ctx.tracker, which the backward then requires.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"

namespace pf {

void linear_forward(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                    int64_t in, int64_t out);
void linear_backward(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int64_t T, int64_t in, int64_t out);

void linear_forward_cpu(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                        int64_t in, int64_t out);
void linear_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                         float* db, int64_t T, int64_t in, int64_t out);
void linear_forward_cuda(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                         int64_t in, int64_t out);
void linear_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX,
                          float* dW, float* db, int64_t T, int64_t in, int64_t out);

// Mixed precision: X [T, in] and W [out, in] hold 16-bit words (`storage` f16
// or bf16); Y, dX, dW, db and dY are fp32. The backward rounds dY to
// `storage` first (so the loss scale must keep small gradients above its
// underflow) and takes db from the rounded dY. Products of 16-bit values are
// exact in fp32 and sums accumulate in fp32, so the CPU (operands widened into
// fp32 scratch from ctx.tracker, then the fp32 path) and CUDA (cublasGemmEx
// with fp32 accumulation) compute the same function up to summation order.
void linear_forward_lowp(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                         float* Y, int64_t T, int64_t in, int64_t out);
void linear_backward_lowp(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                          float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out);
void linear_forward_lowp_cpu(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                             float* Y, int64_t T, int64_t in, int64_t out);
void linear_backward_lowp_cpu(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                              float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out);
void linear_forward_lowp_cuda(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                              float* Y, int64_t T, int64_t in, int64_t out);
void linear_backward_lowp_cuda(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                               float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out);

// float64 reference with the same conventions (dW, db accumulated).
void linear_forward_ref(const double* X, const double* W, const double* b, double* Y, int64_t T, int64_t in,
                        int64_t out);
void linear_backward_ref(const double* dY, const double* X, const double* W, double* dX, double* dW, double* db,
                         int64_t T, int64_t in, int64_t out);

}  // namespace pf
