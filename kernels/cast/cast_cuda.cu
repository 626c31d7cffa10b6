// CUDA conversions fp32 <-> f16/bf16 (cuda_fp16.h / cuda_bf16.h intrinsics,
// round to nearest even), grid-stride loops on ctx.stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cast/cast.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

__device__ __forceinline__ float load_f32(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f32(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__global__ void widen_kernel(int64_t count, const T* __restrict__ in, float* __restrict__ out) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[k] = load_f32(in + k);
}

template <typename T>
__global__ void narrow_kernel(int64_t count, const float* __restrict__ in, T* __restrict__ out) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_f32(out + k, in[k]);
}

}  // namespace

void cast_narrow_cuda(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count) {
  if (count == 0) return;
  const cudaStream_t stream = cuda_stream(ctx);
  const unsigned blocks = grid_size(count, kThreads, kMaxBlocks);
  if (storage == DType::f16)
    narrow_kernel<<<blocks, kThreads, 0, stream>>>(count, in, static_cast<__half*>(out));
  else
    narrow_kernel<<<blocks, kThreads, 0, stream>>>(count, in, static_cast<__nv_bfloat16*>(out));
  PF_CUDA_CHECK_LAUNCH();
}

void cast_widen_cuda(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count) {
  if (count == 0) return;
  const cudaStream_t stream = cuda_stream(ctx);
  const unsigned blocks = grid_size(count, kThreads, kMaxBlocks);
  if (storage == DType::f16)
    widen_kernel<<<blocks, kThreads, 0, stream>>>(count, static_cast<const __half*>(in), out);
  else
    widen_kernel<<<blocks, kThreads, 0, stream>>>(count, static_cast<const __nv_bfloat16*>(in), out);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
