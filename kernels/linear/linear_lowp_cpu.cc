// CPU linear layer with 16-bit operands, on ctx.stream: the operands (and the
// rounded dY) are widened into fp32 scratch tensors from ctx.tracker and the
// fp32 path (linear_cpu.cc) runs on them; the nested _cpu calls take the same
// ctx, so they run inline, in order. Widening is exact and fp32 holds every
// product of two 16-bit values exactly, so this is the function a 16-bit
// GEMM with fp32 accumulation computes.
#include "kernels/cast/cast.h"
#include "kernels/linear/linear.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

Tensor widened(const ExecContext& ctx, DType storage, const void* in, int64_t count, const char* tag) {
  Tensor t = Tensor::empty({count}, DType::f32, *ctx.tracker, tag);
  cast_widen_cpu(ctx, storage, in, t.data<float>(), count);
  return t;
}

}  // namespace

void linear_forward_lowp_cpu(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                             float* Y, int64_t T, int64_t in, int64_t out) {
  host_launch(ctx, [=] {
    const Tensor x = widened(ctx, storage, X, T * in, "linear.lowp_x");
    const Tensor w = widened(ctx, storage, W, out * in, "linear.lowp_w");
    linear_forward_cpu(ctx, x.data<float>(), w.data<float>(), b, Y, T, in, out);
  });
}

void linear_backward_lowp_cpu(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                              float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out) {
  host_launch(ctx, [=] {
    Tensor dy = Tensor::empty({T * out}, storage, *ctx.tracker, "linear.lowp_dy");
    cast_narrow_cpu(ctx, storage, dY, dy.raw(), T * out);
    const Tensor dyw = widened(ctx, storage, dy.raw(), T * out, "linear.lowp_dy");
    dy = Tensor();
    const Tensor x = widened(ctx, storage, X, T * in, "linear.lowp_x");
    const Tensor w = widened(ctx, storage, W, out * in, "linear.lowp_w");
    linear_backward_cpu(ctx, dyw.data<float>(), x.data<float>(), w.data<float>(), dX, dW, db, T, in, out);
  });
}

}  // namespace pf
