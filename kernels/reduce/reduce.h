// Whole-buffer reductions and scalings for the optimizer step.
//   sum_of_squares: sum_i x[i]^2 over a flat buffer x [n], accumulated in
//     double, in a fixed order (deterministic for any thread count); the
//     global gradient norm is sqrt of this over every gradient buffer (the
//     caller adds the per-buffer sums; gradients are already allreduced).
//   scale_values: x[i] *= s in place (e.g. gradient clipping).
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

// Returns a host value, so it synchronises ctx.stream (both backends); on CUDA
// it uses a few KiB of temporary device memory recorded in ctx.tracker (required).
double sum_of_squares(const ExecContext& ctx, const float* x, int64_t n);
void scale_values(const ExecContext& ctx, float* x, int64_t n, float s);

double sum_of_squares_cpu(const ExecContext& ctx, const float* x, int64_t n);
void scale_values_cpu(const ExecContext& ctx, float* x, int64_t n, float s);
double sum_of_squares_cuda(const ExecContext& ctx, const float* x, int64_t n);
void scale_values_cuda(const ExecContext& ctx, float* x, int64_t n, float s);

double sum_of_squares_ref(const double* x, int64_t n);

}  // namespace pf
