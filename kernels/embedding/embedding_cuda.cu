// CUDA embedding: ids [T], table [V,C] -> Y [T,C]; backward dTable [V,C] +=
// scatter of dY [T,C]. The backward is deterministic: token indices are
// stable-radix-sorted by id (cub), then pieces of the sorted order are summed
// over the whole GPU and their runs combined in a fixed order
// (embedding_backward_cuda.cuh): the same bits on every run, equal to the CPU
// path to rounding (the CPU adds tokens in increasing t one by one).
// Out-of-range ids give zero rows (forward) and are sorted past V and
// ignored (backward).
#include <cub/device/device_radix_sort.cuh>

#include "kernels/embedding/embedding.h"
#include "kernels/embedding/embedding_backward_cuda.cuh"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

__global__ void embedding_forward_kernel(const int32_t* ids, const float* table, float* Y, int64_t T, int64_t V,
                                         int64_t C) {
  const int64_t n = T * C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / C, c = i - t * C;
    const int32_t id = ids[t];
    Y[i] = (id >= 0 && id < V) ? table[int64_t(id) * C + c] : 0.f;
  }
}

__global__ void embedding_sort_input_kernel(const int32_t* ids, int32_t* keys, int32_t* index, int64_t T, int64_t V) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < T; t += int64_t(gridDim.x) * blockDim.x) {
    const int32_t id = ids[t];
    keys[t] = (id >= 0 && id < V) ? id : static_cast<int32_t>(V);
    index[t] = static_cast<int32_t>(t);
  }
}

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

}  // namespace

void embedding_forward_cuda(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T,
                            int64_t V, int64_t C) {
  if (T == 0 || C == 0) return;
  embedding_forward_kernel<<<grid_size(T * C, kThreads, kMaxBlocks), kThreads, 0, cuda_stream(ctx)>>>(ids, table, Y, T,
                                                                                                      V, C);
  PF_CUDA_CHECK_LAUNCH();
}

void embedding_backward_cuda(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                             int64_t V, int64_t C) {
  if (T == 0 || C == 0 || V == 0) return;
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "embedding_backward on " << ctx.device.str() << " needs ctx.tracker");
  PF_REQUIRE(ValueError, T < (int64_t(1) << 31) && V < (int64_t(1) << 31) - 1,
             "embedding_backward: T=" << T << " V=" << V << " exceed int32 sort keys");
  const cudaStream_t stream = cuda_stream(ctx);
  int end_bit = 1;
  while (end_bit < 32 && (int64_t(1) << end_bit) <= V) ++end_bit;  // keys lie in [0, V]
  size_t sort_bytes = 0;
  PF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<int>(T), 0, end_bit,
                                                stream));
  const int64_t array_bytes = ceil_div(T * 4, 256) * 256;
  // keys and indices in and out (256-byte aligned), then cub's temporary storage
  const Tensor scratch = Tensor::empty({4 * array_bytes + static_cast<int64_t>(sort_bytes)}, DType::u8, *ctx.tracker,
                                       "embedding_backward");
  char* base = static_cast<char*>(scratch.raw());
  int32_t* keys_in = reinterpret_cast<int32_t*>(base);
  int32_t* keys_out = reinterpret_cast<int32_t*>(base + array_bytes);
  int32_t* index_in = reinterpret_cast<int32_t*>(base + 2 * array_bytes);
  int32_t* index_out = reinterpret_cast<int32_t*>(base + 3 * array_bytes);
  void* sort_scratch = base + 4 * array_bytes;

  embedding_sort_input_kernel<<<grid_size(T, kThreads, kMaxBlocks), kThreads, 0, stream>>>(ids, keys_in, index_in, T,
                                                                                           V);
  PF_CUDA_CHECK_LAUNCH();
  PF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, keys_in, keys_out, index_in, index_out,
                                                static_cast<int>(T), 0, end_bit, stream));
  {
    CudaGridLaunch L(ctx, "embedding_backward");
    embedding_cuda::add_sorted_rows(L, keys_out, index_out, dY, dTable, T, V, C);
  }
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the sort's scratch is freed on return
}

}  // namespace pf
