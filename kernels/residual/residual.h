// Residual connection on token rows, element-wise over n values (e.g. [T, C]):
//   out = a + b            out may alias a or b (in-place accumulation).
// The backward of a residual is the identity; the same call adds the two
// gradient paths (d_residual += d_branch).
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

void residual_add(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n);

void residual_add_cpu(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n);
void residual_add_cuda(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n);
void residual_add_ref(const double* a, const double* b, double* out, int64_t n);

}  // namespace pf
