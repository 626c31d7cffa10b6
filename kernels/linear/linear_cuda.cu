// CUDA linear layer: X [T,in], W [out,in], b [out], Y [T,out]. GEMMs through
// cuBLAS (gemm_f32_cuda on ctx.stream); the bias broadcast is a grid-stride
// kernel; the bias gradient db[o] += sum_t dY[t,o] is the deterministic
// two-pass column sum of kernels/reduce/column_sums_cuda.cuh (chunks of rows
// spread over the GPU, partials summed in a fixed order, scratch of at most
// 4 KiB per column). The 16-bit-operand variants use
// gemm_lowp_cuda (fp32 accumulation) and round dY into a scratch tensor.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cast/cast.h"
#include "kernels/gemm/gemm.h"
#include "kernels/linear/linear.h"
#include "kernels/reduce/column_sums_cuda.cuh"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

__global__ void bias_rows_kernel(const float* b, float* Y, int64_t T, int64_t out) {
  const int64_t n = T * out;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    Y[i] = b[i % out];
}

struct WidenHalf {
  __device__ float operator()(__half v) const { return __half2float(v); }
};
struct WidenBf16 {
  __device__ float operator()(__nv_bfloat16 v) const { return __bfloat162float(v); }
};

// db[o] += sum_t dY[t, o] (column_sums_cuda.cuh: chunks of rows over the
// whole GPU, a fixed order of additions).
template <typename T_in, typename Widen>
void bias_grad(const ExecContext& ctx, const T_in* dY, float* db, int64_t T, int64_t out) {
  if (!db || out == 0) return;
  CudaGridLaunch L(ctx, "linear.bias_grad");
  column_sums_cuda::add_column_sums<1>(L, column_sums_cuda::ValueRows<T_in, Widen>{dY, out}, {{db}}, T, out);
}

void bias_rows(const ExecContext& ctx, const float* b, float* Y, int64_t T, int64_t out) {
  const int64_t n = T * out;
  // n / 256 + 1 blocks (capped): one more than needed when 256 divides n, as this launch always had.
  bias_rows_kernel<<<grid_size(n + 1, 256, 65536), 256, 0, cuda_stream(ctx)>>>(b, Y, T, out);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void linear_forward_cuda(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                         int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  if (b) bias_rows(ctx, b, Y, T, out);
  gemm_f32_cuda(ctx, false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
}

void linear_backward_cuda(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX,
                          float* dW, float* db, int64_t T, int64_t in, int64_t out) {
  if (T == 0) return;
  if (dX) gemm_f32_cuda(ctx, false, false, T, in, out, 1.0f, dY, out, W, in, 0.0f, dX, in);
  gemm_f32_cuda(ctx, true, false, out, in, T, 1.0f, dY, out, X, in, 1.0f, dW, in);
  bias_grad<float, column_sums_cuda::Identity>(ctx, dY, db, T, out);
}

void linear_forward_lowp_cuda(const ExecContext& ctx, DType storage, const void* X, const void* W, const float* b,
                              float* Y, int64_t T, int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  if (b) bias_rows(ctx, b, Y, T, out);
  gemm_lowp_cuda(ctx, storage, false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
}

void linear_backward_lowp_cuda(const ExecContext& ctx, DType storage, const float* dY, const void* X, const void* W,
                               float* dX, float* dW, float* db, int64_t T, int64_t in, int64_t out) {
  if (T == 0) return;
  Tensor dy = Tensor::empty({T * out}, storage, *ctx.tracker, "linear.lowp_dy");
  cast_narrow_cuda(ctx, storage, dY, dy.raw(), T * out);
  if (dX) gemm_lowp_cuda(ctx, storage, false, false, T, in, out, 1.0f, dy.raw(), out, W, in, 0.0f, dX, in);
  gemm_lowp_cuda(ctx, storage, true, false, out, in, T, 1.0f, dy.raw(), out, X, in, 1.0f, dW, in);
  if (storage == DType::f16) bias_grad<__half, WidenHalf>(ctx, static_cast<const __half*>(dy.raw()), db, T, out);
  else bias_grad<__nv_bfloat16, WidenBf16>(ctx, static_cast<const __nv_bfloat16*>(dy.raw()), db, T, out);
  // The scratch returns to the tracker only once the stream is done with it.
  synchronize(ctx.stream);
}

}  // namespace pf
