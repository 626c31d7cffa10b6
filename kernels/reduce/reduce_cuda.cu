// CUDA sum of squares over x [n]: a fixed grid of kBlocks blocks accumulates in
// double (grid-stride), each block reduces in shared memory to one partial, and
// one block adds the partials in a fixed tree order: deterministic.
// scale_values: x *= s (grid-stride).
#include "kernels/reduce/reduce.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kBlocks = 512;
constexpr int kThreads = 256;

__device__ void block_sum(double* sh) {
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
}

__global__ void sum_squares_partial_kernel(const float* x, int64_t n, double* partial) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n; i += int64_t(kBlocks) * kThreads) {
    const double xi = x[i];
    s += xi * xi;
  }
  sh[threadIdx.x] = s;
  __syncthreads();
  block_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

__global__ void sum_partials_kernel(double* partial) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int i = threadIdx.x; i < kBlocks; i += kThreads) s += partial[i];
  sh[threadIdx.x] = s;
  __syncthreads();
  block_sum(sh);
  if (threadIdx.x == 0) partial[0] = sh[0];
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

}  // namespace

double sum_of_squares_cuda(const ExecContext& ctx, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "sum_of_squares on " << ctx.device.str() << " needs ctx.tracker");
  const cudaStream_t stream = cuda_stream(ctx);
  const Tensor partials = Tensor::empty({kBlocks}, DType::f64, *ctx.tracker, "sum_of_squares");
  double* partial = partials.data<double>();
  double result = 0.0;
  sum_squares_partial_kernel<<<kBlocks, kThreads, 0, stream>>>(x, n, partial);
  PF_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partial);
  PF_CUDA_CHECK_LAUNCH();
  PF_CUDA_CHECK(cudaMemcpyAsync(&result, partial, sizeof(double), cudaMemcpyDeviceToHost, stream));
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

void scale_values_cuda(const ExecContext& ctx, float* x, int64_t n, float s) {
  if (n == 0) return;
  scale_kernel<<<grid_size(n, 256, 65536), 256, 0, cuda_stream(ctx)>>>(x, n, s);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
