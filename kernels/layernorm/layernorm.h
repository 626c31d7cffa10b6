// Layer norm over the last dimension of token rows.
//   X, Y, dY, dX [T, C]; gamma, beta, dgamma, dbeta [C]; mean, rstd [T]
//   forward:  Y = (X - mean) * rstd * gamma + beta, saving mean and rstd per row
//             (rstd = 1/sqrt(biased variance + eps); eps is 1e-5 in the model)
//   backward: dX overwritten; dgamma += sum_t dY * xhat; dbeta += sum_t dY
//             (gradient buffers accumulate). Uses the saved mean and rstd.
// Deterministic on both backends. Pointers live on ctx.device. On CUDA the
// backward takes the partial sums of dgamma and dbeta
// (column_sums_scratch_bytes) from ctx.tracker, which it then requires.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                       float* mean, float* rstd, int64_t T, int64_t C, float eps = kLayerNormEps);
void layernorm_backward(const ExecContext& ctx, const float* dY, const float* X, const float* gamma, const float* mean,
                        const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T, int64_t C);

void layernorm_forward_cpu(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                           float* mean, float* rstd, int64_t T, int64_t C, float eps);
void layernorm_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, const float* gamma,
                            const float* mean, const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T,
                            int64_t C);
void layernorm_forward_cuda(const ExecContext& ctx, const float* X, const float* gamma, const float* beta, float* Y,
                            float* mean, float* rstd, int64_t T, int64_t C, float eps);
void layernorm_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* gamma,
                             const float* mean, const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t T,
                             int64_t C);

void layernorm_forward_ref(const double* X, const double* gamma, const double* beta, double* Y, double* mean,
                           double* rstd, int64_t T, int64_t C, double eps);
void layernorm_backward_ref(const double* dY, const double* X, const double* gamma, const double* mean,
                            const double* rstd, double* dX, double* dgamma, double* dbeta, int64_t T, int64_t C);

}  // namespace pf
