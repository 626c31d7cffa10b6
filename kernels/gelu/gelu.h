// GELU (tanh approximation), element-wise over n values (any shape, e.g. the
// FFN hidden activations [T, 4C]).
//   forward:  Y = gelu(X)
//   backward: dX = dY * gelu'(X)          (dX is overwritten, not accumulated)
// Y may alias X; dX may alias dY. Pointers live on ctx.device.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

void gelu_forward(const ExecContext& ctx, const float* X, float* Y, int64_t n);
void gelu_backward(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n);

void gelu_forward_cpu(const ExecContext& ctx, const float* X, float* Y, int64_t n);
void gelu_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n);
void gelu_forward_cuda(const ExecContext& ctx, const float* X, float* Y, int64_t n);
void gelu_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, float* dX, int64_t n);

void gelu_forward_ref(const double* X, double* Y, int64_t n);
void gelu_backward_ref(const double* dY, const double* X, double* dX, int64_t n);

}  // namespace pf
