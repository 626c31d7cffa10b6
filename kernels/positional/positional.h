// Sinusoidal positional encoding added to token rows, fed with GLOBAL
// positions so the function does not depend on how a sequence is split:
//   x [B, n, C];  x[b, i, :] += pe(offset + i)
//   pe(p)[2j] = sin(p / 10000^(2j/C)),  pe(p)[2j+1] = cos(p / 10000^(2j/C))
// Angles are formed in double, so positions up to millions keep their precision.
// No parameters, so no backward (the gradient passes through unchanged).
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

void sinusoidal_add(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset);
void sinusoidal_add_cpu(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset);
void sinusoidal_add_cuda(const ExecContext& ctx, float* x, int64_t B, int64_t n, int64_t C, int64_t offset);

}  // namespace pf
