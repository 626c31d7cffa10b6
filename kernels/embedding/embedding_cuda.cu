// CUDA embedding: ids [T], table [V,C] -> Y [T,C]; backward dTable [V,C] +=
// scatter of dY [T,C]. The backward is deterministic: token indices are
// stable-radix-sorted by id (cub), then one thread per (id, column) sums its
// tokens in increasing t, so the order of additions matches the CPU path.
// Out-of-range ids give zero rows (forward) and are sorted past V and
// ignored (backward).
#include <cub/device/device_radix_sort.cuh>

#include "kernels/embedding/embedding.h"
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

__device__ int64_t lower_bound_key(const int32_t* keys, int64_t n, int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (keys[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// grid = (column tiles of blockDim.x, ids); each thread owns one (id, column).
__global__ void embedding_backward_kernel(const int32_t* sorted_keys, const int32_t* sorted_index, const float* dY,
                                          float* dTable, int64_t T, int64_t V, int64_t C) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t v = blockIdx.y; v < V; v += gridDim.y) {
    const int64_t lo = lower_bound_key(sorted_keys, T, v), hi = lower_bound_key(sorted_keys, T, v + 1);
    if (lo == hi || c >= C) continue;
    float acc = dTable[v * C + c];  // added onto in token order, exactly as the CPU path does
    for (int64_t i = lo; i < hi; ++i) acc += dY[int64_t(sorted_index[i]) * C + c];
    dTable[v * C + c] = acc;
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
  const dim3 grid(static_cast<unsigned>(ceil_div(C, 128)), static_cast<unsigned>(V < 65535 ? V : 65535));
  embedding_backward_kernel<<<grid, 128, 0, stream>>>(keys_out, index_out, dY, dTable, T, V, C);
  PF_CUDA_CHECK_LAUNCH();
  PF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
}

}  // namespace pf
