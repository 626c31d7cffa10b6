// CUDA softmax cross-entropy: logits [T,V], targets [T] -> losses [T] and sums;
// backward dlogits [T,V]. One warp per row (max / argmax / sum of exponentials
// with warp shuffles, in fp32). The sums are reduced by one block in a fixed
// order (loss in double), so they are deterministic.
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/cross_entropy/cross_entropy_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kReduceThreads = 256;

struct RowStats {
  float max;
  int64_t arg;
  float sum;  // sum of exp(l - max)
};

__device__ RowStats row_stats(const float* l, int64_t V, int lane) {
  float m = -INFINITY;
  int64_t arg = V;
  for (int64_t j = lane; j < V; j += 32)
    if (l[j] > m) m = l[j], arg = j;
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, off);
    if (om > m || (om == m && oa < arg)) m = om, arg = oa;
  }
  float s = 0.f;
  for (int64_t j = lane; j < V; j += 32) s += expf(l[j] - m);
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  return {m, arg, s};
}

// flags[t]: 0 ignored, 1 predicted, 3 predicted and top-1 correct.
__global__ void cross_entropy_forward_kernel(const float* logits, const int32_t* targets, float* losses,
                                             int32_t* flags, int64_t T, int64_t V) {
  const int64_t t = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.y;
  if (t >= T) return;
  const int lane = threadIdx.x;
  const int32_t y = targets[t];
  if (y < 0 || y >= V) {
    if (lane == 0) losses[t] = 0.f, flags[t] = 0;
    return;
  }
  const float* l = logits + t * V;
  const RowStats st = row_stats(l, V, lane);
  if (lane == 0) {
    losses[t] = cross_entropy_token_loss(st.max, st.sum, l[y]);
    flags[t] = st.arg == y ? 3 : 1;
  }
}

// One block: out = {loss_sum (double), count, correct}.
__global__ void cross_entropy_sums_kernel(const float* losses, const int32_t* flags, int64_t T, double* out) {
  __shared__ double sl[kReduceThreads];
  __shared__ long long sc[kReduceThreads], sk[kReduceThreads];
  double l = 0.0;
  long long c = 0, k = 0;
  for (int64_t t = threadIdx.x; t < T; t += kReduceThreads) {
    l += losses[t];
    c += flags[t] & 1;
    k += flags[t] >> 1;
  }
  sl[threadIdx.x] = l, sc[threadIdx.x] = c, sk[threadIdx.x] = k;
  __syncthreads();
  for (int w = kReduceThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      sl[threadIdx.x] += sl[threadIdx.x + w];
      sc[threadIdx.x] += sc[threadIdx.x + w];
      sk[threadIdx.x] += sk[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = sl[0];
    out[1] = static_cast<double>(sc[0]);
    out[2] = static_cast<double>(sk[0]);
  }
}

__global__ void cross_entropy_backward_kernel(const float* logits, const int32_t* targets, float* dlogits, int64_t T,
                                              int64_t V, float scale) {
  const int64_t t = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.y;
  if (t >= T) return;
  const int lane = threadIdx.x;
  const int32_t y = targets[t];
  float* d = dlogits + t * V;
  if (y < 0 || y >= V) {
    for (int64_t j = lane; j < V; j += 32) d[j] = 0.f;
    return;
  }
  const float* l = logits + t * V;
  const RowStats st = row_stats(l, V, lane);
  const float inv = 1.f / st.sum;
  __syncwarp();  // every lane has read the row before any lane overwrites it (in-place use)
  for (int64_t j = lane; j < V; j += 32) d[j] = cross_entropy_logit_grad(l[j], st.max, inv, j == y, scale);
}

}  // namespace

CrossEntropySums cross_entropy_forward_cuda(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                            float* losses, int64_t T, int64_t V) {
  if (T == 0 || V == 0) return {};
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "cross_entropy_forward on " << ctx.device.str() << " needs ctx.tracker");
  const cudaStream_t stream = cuda_stream(ctx);
  // The 3 sums (double), then one flag per row (int32).
  const Tensor scratch = Tensor::empty({3 * 8 + T * 4}, DType::u8, *ctx.tracker, "cross_entropy_forward");
  double* out = static_cast<double*>(scratch.raw());
  int32_t* flags = reinterpret_cast<int32_t*>(out + 3);
  double host[3] = {0, 0, 0};
  const unsigned grid = static_cast<unsigned>(ceil_div(T, kWarpsPerBlock));
  cross_entropy_forward_kernel<<<grid, dim3(32, kWarpsPerBlock), 0, stream>>>(logits, targets, losses, flags, T, V);
  PF_CUDA_CHECK_LAUNCH();
  cross_entropy_sums_kernel<<<1, kReduceThreads, 0, stream>>>(losses, flags, T, out);
  PF_CUDA_CHECK_LAUNCH();
  PF_CUDA_CHECK(cudaMemcpyAsync(host, out, sizeof(host), cudaMemcpyDeviceToHost, stream));
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));
  CrossEntropySums sums;
  sums.loss_sum = host[0];
  sums.count = static_cast<int64_t>(host[1]);
  sums.correct = static_cast<int64_t>(host[2]);
  return sums;
}

void cross_entropy_backward_cuda(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                                 int64_t T, int64_t V, float scale) {
  if (T == 0 || V == 0) return;
  const unsigned grid = static_cast<unsigned>(ceil_div(T, kWarpsPerBlock));
  cross_entropy_backward_kernel<<<grid, dim3(32, kWarpsPerBlock), 0, cuda_stream(ctx)>>>(logits, targets, dlogits, T, V,
                                                                                         scale);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
