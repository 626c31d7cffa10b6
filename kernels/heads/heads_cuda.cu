#include "kernels/heads/heads.h"
#include "kernels/heads/heads_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

template <bool kSplit>
__global__ void heads_move_kernel(HeadsShape s, int64_t total, const float* __restrict__ in, float* __restrict__ out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = heads_row_index(e, s.groups, s.batch, s.heads, s.n, s.dim);
    if (kSplit) out[e] = in[r];
    else out[r] = in[e];
  }
}

template <bool kSplit>
void launch(const ExecContext& ctx, const HeadsShape& s, const float* in, float* out) {
  const int64_t total = s.numel();
  if (total == 0) return;
  const int threads = 256;
  heads_move_kernel<kSplit><<<grid_size(total, threads, 65535), threads, 0, cuda_stream(ctx)>>>(s, total, in, out);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void heads_split_cuda(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads) {
  launch<true>(ctx, s, rows, heads);
}
void heads_merge_cuda(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows) {
  launch<false>(ctx, s, heads, rows);
}

}  // namespace pf
