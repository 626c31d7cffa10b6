// CUDA gated mix (gated_mix.h). Forward: a grid-stride loop. Backward: one
// block per (batch, head) writes da, db and the block's sum of dout (b - a)
// (per-thread double partials, a fixed shared-memory tree) into a scratch
// [batch * heads]; a second kernel adds, per head, s (1 - s) times the sum
// over the batch in order to dgate. No atomics: the result is deterministic.
#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gated_mix/gated_mix_math.h"
#include "runtime/check.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kThreads = 256;

__global__ void forward_kernel(int64_t total, int64_t e, int64_t heads, const float* gate, const float* a,
                               const float* b, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gated_mix_sigmoid(gate[(i / e) % heads]);
    out[i] = a[i] + g * (b[i] - a[i]);
  }
}

__global__ void __launch_bounds__(kThreads)
    backward_kernel(int64_t e, int64_t heads, const float* gate, const float* a, const float* b, const float* dout,
                    float* da, float* db, double* sums) {
  __shared__ double part[kThreads];
  const int64_t hh = blockIdx.x, base = hh * e;
  const float g = gated_mix_sigmoid(gate[hh % heads]);
  double acc = 0;
  for (int64_t i = threadIdx.x; i < e; i += kThreads) {
    const float d = dout[base + i];
    acc += static_cast<double>(d) * (static_cast<double>(b[base + i]) - static_cast<double>(a[base + i]));
    da[base + i] = (1.f - g) * d;
    db[base + i] = g * d;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[hh] = part[0];
}

__global__ void gate_grad_kernel(int64_t batch, int64_t heads, const float* gate, const double* sums, float* dgate) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= heads) return;
  const double g = gated_mix_sigmoid(gate[h]);
  double total = 0;
  for (int64_t bb = 0; bb < batch; ++bb) total += sums[bb * heads + h];
  dgate[h] += static_cast<float>(g * (1.0 - g) * total);
}

}  // namespace

void gated_mix_forward_cuda(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                            const float* b, float* out) {
  const int64_t total = s.total();
  if (total == 0) return;
  forward_kernel<<<grid_size(total, kThreads, 65536), kThreads, 0, cuda_stream(ctx)>>>(total, s.head_elems(), s.heads,
                                                                                       gate, a, b, out);
  PF_CUDA_CHECK_LAUNCH();
}

void gated_mix_backward_cuda(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                             const float* b, const float* dout, float* da, float* db, float* dgate) {
  const int64_t blocks = s.batch * s.heads;
  if (blocks == 0) return;
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "gated mix backward on CUDA needs ctx.tracker for scratch");
  PF_REQUIRE(ValueError, blocks < (int64_t{1} << 31),
             "gated mix on CUDA: too many heads for one grid (" << blocks << ")");
  const cudaStream_t stream = cuda_stream(ctx);
  const Tensor sums = Tensor::empty({blocks}, DType::f64, *ctx.tracker, "gated_mix");
  backward_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(s.head_elems(), s.heads, gate, a, b, dout, da,
                                                                          db, sums.data<double>());
  PF_CUDA_CHECK_LAUNCH();
  gate_grad_kernel<<<static_cast<unsigned>((s.heads + 127) / 128), 128, 0, stream>>>(s.batch, s.heads, gate,
                                                                                     sums.data<double>(), dgate);
  PF_CUDA_CHECK_LAUNCH();
  // The scratch must outlive the kernels before it is returned to the allocator.
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace pf
