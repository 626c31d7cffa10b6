// Dispatch of the fp32 <-> 16-bit conversions by ctx.device.
#include "kernels/cast/cast.h"

#include "runtime/check.h"

namespace pf {

void require_16bit_storage(DType storage, const char* what) {
  PF_REQUIRE(ValueError, storage == DType::f16 || storage == DType::bf16,
             what << ": storage " << dtype_name(storage) << " is not f16 or bf16");
}

void cast_narrow(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count) {
  require_16bit_storage(storage, "cast_narrow");
  if (ctx.device.is_cuda()) cast_narrow_cuda(ctx, storage, in, out, count);
  else cast_narrow_cpu(ctx, storage, in, out, count);
}

void cast_widen(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count) {
  require_16bit_storage(storage, "cast_widen");
  if (ctx.device.is_cuda()) cast_widen_cuda(ctx, storage, in, out, count);
  else cast_widen_cpu(ctx, storage, in, out, count);
}

}  // namespace pf
