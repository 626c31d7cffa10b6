// Fused FAVOR+ on CUDA (favor_attention.h, FavorShape::slab_rows = 0): the
// features of each tile of ct rows (32, or 16 where the device's shared
// memory is smaller) are made in shared memory from q, k and the projection,
// used at once for the tile's products and the running state, and dropped; no
// [n, m] buffer exists. Products run on tensor cores (mma.sync with TF32 or
// bf16 operands, sm_80+) when FavorShape::tile_math asks, else in fp32
// (favor_attention_cuda_tiles.cuh). Features beyond one block's room go to
// feature slices, a block each (feature_slice_width). The algorithm and its
// launch order are in favor_attention_cuda_launch.cuh; this
// file launches it on ctx.stream with temporaries from ctx.tracker. The
// projection gradient dW, when asked, is made by the fused kernels for
// every feature kernel. Nothing here needs sm_80 except the guarded
// tensor-core path.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/favor_attention/favor_attention_backend.h"
#include "kernels/favor_attention/favor_attention_cuda_launch.cuh"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

using namespace favor_cuda;

constexpr const char* kTag = "favor_attention";

int64_t smem_limit(Device device) {
  int limit = 0;
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.index));
  return limit;
}

// The call's sizes on ctx.device (plan_dims).
Dims plan(const ExecContext& ctx, const FavorShape& s) {
  int major = 0;
  PF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device.index));
  const int64_t limit = smem_limit(ctx.device);
  Dims D;
  PF_REQUIRE(ValueError, plan_dims(s, major, limit, &D),
             kTag << ": m=" << s.m << ", d=" << s.d << " need " << favor_min_smem_bytes(s)
                  << " bytes of shared memory per block for 16-row tiles; " << ctx.device.str() << " allows " << limit);
  return D;
}

// The launch policy of favor_attention_cuda_launch.cuh on ctx.stream.
class CudaLaunch {
 public:
  explicit CudaLaunch(const ExecContext& ctx) : ctx_(ctx) {
    PF_REQUIRE(ValueError, ctx.tracker != nullptr, kTag << " on " << ctx.device.str() << " needs ctx.tracker");
  }
  float* buffer(int64_t floats) {
    buffers_.push_back(Tensor::empty({std::max<int64_t>(floats, 1)}, DType::f32, *ctx_.tracker, kTag));
    return buffers_.back().data<float>();
  }
  void tiles(void (*kernel)(Args), unsigned gx, unsigned gy, unsigned gz, int64_t smem, const Args& args) {
    if (gx == 0 || gy == 0 || gz == 0) return;
    PF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<dim3(gx, gy, gz), kThreads, static_cast<size_t>(smem), stream()>>>(args);
    PF_CUDA_CHECK(cudaGetLastError());
  }
  template <typename... P, typename... A>
  void grid(void (*kernel)(P...), unsigned gx, unsigned gy, A... args) {
    if (gx == 0 || gy == 0) return;
    kernel<<<dim3(gx, gy), kThreads, 0, stream()>>>(args...);
    PF_CUDA_CHECK(cudaGetLastError());
  }
  void copy(float* dst, const float* src, int64_t floats) {
    PF_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * floats, cudaMemcpyDeviceToDevice, stream()));
  }

 private:
  cudaStream_t stream() const { return cuda_stream(ctx_); }
  const ExecContext& ctx_;
  std::vector<Tensor> buffers_;  // released in stream order when the call ends
};

}  // namespace

bool favor_cuda_fits(const FavorShape& s, Device device) { return favor_min_smem_bytes(s) <= smem_limit(device); }

int64_t favor_workspace_bytes_cuda(const FavorShape& s) { return fused_workspace_bytes(s); }

void favor_key_state_cuda(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                          float* total) {
  CudaLaunch launch(ctx);
  fused_key_state(launch, plan(ctx, s), heads_of(s), k, v, W, total);
}

void favor_causal_forward_local_cuda(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                     const float* v, const float* W, float* y, float* row_scale, float* block_total) {
  CudaLaunch launch(ctx);
  fused_causal_forward_local(launch, plan(ctx, s), heads_of(s), q, k, v, W, y, row_scale, block_total);
}

void favor_add_prefix_cuda(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                           const float* prefix, float* y, float* row_scale) {
  CudaLaunch launch(ctx);
  fused_add_prefix(launch, plan(ctx, s), heads_of(s), q, W, prefix, y, row_scale, true);
}

void favor_bidirectional_forward_finish_cuda(const ExecContext& ctx, const FavorShape& s, const float* q,
                                             const float* W, const float* total, float* y, float* row_scale) {
  CudaLaunch launch(ctx);
  fused_add_prefix(launch, plan(ctx, s), heads_of(s), q, W, total, y, row_scale, false);
}

void favor_causal_backward_local_cuda(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                      const float* v, const float* W, const float* o, const float* den,
                                      const float* row_scale, const float* d_o, const float* prefix, float* dq,
                                      float* dk, float* dv, float* block_total_grad, float* dW) {
  CudaLaunch launch(ctx);
  fused_causal_backward_local(launch, plan(ctx, s), heads_of(s), q, k, v, W, o, den, row_scale, d_o, prefix, dq, dk, dv,
                              block_total_grad, dW);
}

void favor_backward_add_suffix_cuda(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                    const float* W, const float* suffix, float* dk, float* dv, float* dW) {
  CudaLaunch launch(ctx);
  fused_key_grad_from_state(launch, plan(ctx, s), heads_of(s), k, v, W, suffix, dk, dv, true, dW);
}

void favor_bidirectional_backward_local_cuda(const ExecContext& ctx, const FavorShape& s, const float* q,
                                             const float* W, const float* o, const float* den, const float* row_scale,
                                             const float* d_o, const float* total, float* dq, float* local_grad_total,
                                             float* dW) {
  CudaLaunch launch(ctx);
  fused_bidirectional_backward_local(launch, plan(ctx, s), heads_of(s), q, W, o, den, row_scale, d_o, total, dq,
                                     local_grad_total, dW);
}

void favor_bidirectional_backward_finish_cuda(const ExecContext& ctx, const FavorShape& s, const float* k,
                                              const float* v, const float* W, const float* grad_total, float* dk,
                                              float* dv, float* dW) {
  CudaLaunch launch(ctx);
  fused_key_grad_from_state(launch, plan(ctx, s), heads_of(s), k, v, W, grad_total, dk, dv, false, dW);
}

}  // namespace pf
