// Conversions between fp32 and the 16-bit storage types of mixed-precision
// training, elementwise over `count` values on ctx.device:
//   narrow: out[k] = round_to_nearest_even(in[k]) as f16 or bf16 words
//           (f16: |x| >= 65520 becomes +-Inf; NaN stays NaN)
//   widen:  out[k] = float(in[k])  (exact)
// `in` and `out` may not overlap.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"

namespace pf {

void cast_narrow(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count);
void cast_widen(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count);

void cast_narrow_cpu(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count);
void cast_widen_cpu(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count);
void cast_narrow_cuda(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count);
void cast_widen_cuda(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count);

// float64 reference: the value `x` takes once rounded to `storage` (f16,
// bf16, or f32 for no rounding), by frexp/ldexp arithmetic independent of the
// bit tricks above, with subnormals and overflow to infinity.
double round_to_storage_ref(double x, DType storage);

// Throws ValueError unless `storage` is f16 or bf16 (names `what`).
void require_16bit_storage(DType storage, const char* what);

}  // namespace pf
