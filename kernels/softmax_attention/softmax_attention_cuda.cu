// CUDA exact softmax attention per head of [heads, n, d] row-major (d <= 128);
// lse [heads, n]. Q, K, V, O, dO, dQ, dK, dV are stored as f32, f16 or bf16
// (the kernels are templated on the storage type); tiles are widened to fp32
// in shared memory on load, so scores, exponentials, row statistics and all
// accumulations run in fp32 and results are rounded once on store. lse stays
// fp32. The kernels and their launch order: softmax_attention_cuda.cuh (one
// block per (head, query tile) forward; per (head, key tile) for dK, dV and
// per (head, query tile) for dQ backward), in fp32 on any device; with
// SoftmaxAttentionParams::tile_math TF32 or bf16, on an sm_80+ device whose
// shared memory holds the tiles, the tensor-core kernels of
// softmax_attention_cuda_mma.cuh, likewise. Both backwards write each
// gradient once, summed in a fixed order (no atomics). Over pieces
// (p.pieces) both read the pieces' table: one launch per kernel for all
// pieces.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_cuda.cuh"
#include "runtime/check.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

using namespace softmax_cuda;

constexpr const char* kTag = "softmax_attention";

// The launch policy of softmax_attention_cuda.cuh on ctx.stream.
class CudaLaunch {
 public:
  explicit CudaLaunch(const ExecContext& ctx) : stream_(cuda_stream(ctx)) {}
  template <typename... P, typename... A>
  void blocks(void (*kernel)(P...), int64_t blocks, int64_t smem, A... args) {
    if (blocks == 0) return;
    if (smem > 0)
      PF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<static_cast<unsigned>(blocks), kThreads, static_cast<size_t>(smem), stream_>>>(args...);
    PF_CUDA_CHECK_LAUNCH();
  }

 private:
  cudaStream_t stream_;
};

void check_cuda_params(const ExecContext& ctx, const SoftmaxAttentionParams& p) {
  PF_REQUIRE(CudaError, ctx.device.is_cuda(), "softmax attention CUDA path called on " << ctx.device.str());
  PF_REQUIRE(ValueError, p.d <= kMaxD, "softmax attention on CUDA supports d <= " << kMaxD << ", got d=" << p.d);
  PF_REQUIRE(ValueError, p.heads * ceil_div(p.n, kBwdQ) < (int64_t{1} << 31),
             "softmax attention on CUDA: too many tiles for one grid (heads=" << p.heads << " n=" << p.n << ")");
}

// The tensor-core kernels' buffers for the call (mma_stages), all 0 unless it
// asks for them, the device is sm_80+ and both directions fit its shared
// memory: then it runs on them, else on the fp32 kernels.
MmaStages mma_plan(const ExecContext& ctx, const SoftmaxAttentionParams& p) {
  if (p.tile_math == TileMath::Fp32) return {};
  int major = 0, limit = 0;
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device.index));
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device.index));
  const MmaStages stages = mma_stages(p.tile_math, static_cast<int>(p.d), limit);
  return major >= 8 && stages.forward > 0 && stages.backward > 0 ? stages : MmaStages{};
}

template <typename T>
void forward_impl(const ExecContext& ctx, const SoftmaxAttentionParams& p, const T* Q, const T* K, const T* V, T* O,
                  float* lse) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  CudaLaunch launch(ctx);
  const MmaStages mma = mma_plan(ctx, p);
  if (mma.forward > 0) return forward_mma(launch, p, scale, mma.forward, Q, K, V, O, lse);
  forward(launch, p, scale, Q, K, V, O, lse);
}

// The backward, over all heads or pieces at once: on tensor cores, or on
// the fp32 kernels; neither uses atomics. Scratch, recorded in ctx.tracker
// over the rows the call reaches: D. The stream is synchronised before the
// scratch is freed.
template <typename T>
void backward_impl(const ExecContext& ctx, const SoftmaxAttentionParams& p, const T* Q, const T* K, const T* V,
                   const T* O, const float* lse, const T* dO, T* dQ, T* dK, T* dV) {
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0 || p.n == 0) return;
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "softmax attention backward on CUDA needs ctx.tracker for scratch");
  const MmaStages mma = mma_plan(ctx, p);
  const Tensor scratch = Tensor::empty({softmax_attention_rows(p)}, DType::f32, *ctx.tracker, kTag);
  float* D = scratch.data<float>();
  CudaLaunch launch(ctx);
  if (mma.backward > 0)
    backward_mma(launch, p, scale, mma.backward, Q, K, V, O, lse, dO, D, dQ, dK, dV);
  else
    backward(launch, p, scale, Q, K, V, O, lse, dO, D, dQ, dK, dV);
  // The scratch must outlive the kernels before it is returned to the allocator.
  PF_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(ctx)));
}

}  // namespace

void softmax_attention_decode_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                                   const float* q, const float* K, const float* V, float* o) {
  softmax_attention_decode_check(p, kv_stride);
  const float scale = softmax_attention_scale(p);
  check_cuda_params(ctx, p);
  if (p.heads == 0) return;
  CudaLaunch launch(ctx);
  decode(launch, p, scale, kv_stride, q, K, V, o);
}

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, float* O, float* lse) {
  forward_impl<float>(ctx, p, Q, K, V, O, lse);
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                     const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                     float* dQ, float* dK, float* dV) {
  backward_impl<float>(ctx, p, Q, K, V, O, lse, dO, dQ, dK, dV);
}

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                    const void* Q, const void* K, const void* V, void* O, float* lse) {
  switch (storage) {
    case DType::f32:
      return forward_impl(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                          static_cast<const float*>(V), static_cast<float*>(O), lse);
    case DType::f16:
      return forward_impl(ctx, p, static_cast<const __half*>(Q), static_cast<const __half*>(K),
                          static_cast<const __half*>(V), static_cast<__half*>(O), lse);
    case DType::bf16:
      return forward_impl(ctx, p, static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
                          static_cast<const __nv_bfloat16*>(V), static_cast<__nv_bfloat16*>(O), lse);
    default: break;
  }
  PF_REQUIRE(ValueError, false,
             "softmax_attention_forward on CUDA: unsupported storage " << dtype_name(storage) << " (f32, f16 or bf16)");
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                     const void* Q, const void* K, const void* V, const void* O, const float* lse,
                                     const void* dO, void* dQ, void* dK, void* dV) {
  switch (storage) {
    case DType::f32:
      return backward_impl(ctx, p, static_cast<const float*>(Q), static_cast<const float*>(K),
                           static_cast<const float*>(V), static_cast<const float*>(O), lse,
                           static_cast<const float*>(dO), static_cast<float*>(dQ), static_cast<float*>(dK),
                           static_cast<float*>(dV));
    case DType::f16:
      return backward_impl(ctx, p, static_cast<const __half*>(Q), static_cast<const __half*>(K),
                           static_cast<const __half*>(V), static_cast<const __half*>(O), lse,
                           static_cast<const __half*>(dO), static_cast<__half*>(dQ), static_cast<__half*>(dK),
                           static_cast<__half*>(dV));
    case DType::bf16:
      return backward_impl(ctx, p, static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
                           static_cast<const __nv_bfloat16*>(V), static_cast<const __nv_bfloat16*>(O), lse,
                           static_cast<const __nv_bfloat16*>(dO), static_cast<__nv_bfloat16*>(dQ),
                           static_cast<__nv_bfloat16*>(dK), static_cast<__nv_bfloat16*>(dV));
    default: break;
  }
  PF_REQUIRE(
      ValueError, false,
      "softmax_attention_backward on CUDA: unsupported storage " << dtype_name(storage) << " (f32, f16 or bf16)");
}

}  // namespace pf
