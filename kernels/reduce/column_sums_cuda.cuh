// Deterministic column sums of row-major [T, C] data on CUDA, in two passes,
// written against a launch policy so that the same code runs on a GPU and,
// for the tests, on the CPU under the block emulator
// (tests/support/cuda_block_emulator.h):
//   out_k[c] += sum_t rows_k(t, c)        K = 1 or 2 sums per column
// Pass 1: grid (chunks, column tiles); the thread of column c in block j
//   sums rows [j R, min(T, (j + 1) R)) in increasing t and writes
//   partial [K, chunks, C].
// Pass 2: one thread per column adds the chunks' partials in increasing j.
// The chunk size R depends on T alone, never on the device or the launch, so
// every run on every GPU gives the same bits; no atomics. Up to kMaxChunks
// chunks (of at least kMinChunkRows rows) spread any T over the whole GPU:
// T = 284,672 rows of C = 512 columns are 1,024 x 4 blocks, where one block
// per 32 columns walking every row gave 16 blocks. Scratch: K x chunks x C
// floats (column_sums_scratch_bytes in column_sums.h).
//
// Launch policy L:
//   float* L.buffer(int64_t floats)                  a temporary living as long as L
//   L.grid(kernel, gx, gy, threads, args...)         no shared memory
// A Rows functor has `__device__ void operator()(int64_t t, int64_t c,
// float (&acc)[K]) const` that adds row t's terms of column c to acc.
// Included by one translation unit per binary (internal linkage).
#pragma once

#include <cstdint>

#include "kernels/reduce/column_sums.h"

namespace pf {
namespace column_sums_cuda {
namespace {

using column_sums::Chunks;
using column_sums::chunks_for;
using column_sums::kThreads;

inline unsigned column_tiles(int64_t C) { return static_cast<unsigned>(ceil_div(C, kThreads)); }

template <int K>
struct Outputs {
  float* out[K];
};

template <int K, typename Rows>
__global__ void partials_kernel(Rows rows, float* partial, int64_t T, int64_t C, int64_t chunk_rows, int64_t chunks) {
  const int64_t j = blockIdx.x, c = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= C) return;
  float acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.f;
  const int64_t begin = j * chunk_rows, end = begin + chunk_rows < T ? begin + chunk_rows : T;
  for (int64_t t = begin; t < end; ++t) rows(t, c, acc);
  for (int k = 0; k < K; ++k) partial[(k * chunks + j) * C + c] = acc[k];
}

template <int K>
__global__ void finish_kernel(const float* partial, Outputs<K> out, int64_t C, int64_t chunks) {
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= C) return;
  for (int k = 0; k < K; ++k) {
    float s = 0.f;
    for (int64_t j = 0; j < chunks; ++j) s += partial[(k * chunks + j) * C + c];
    out.out[k][c] += s;
  }
}

// out.out[k][c] += sum over t of rows' k-th term, in the fixed order above.
template <int K, typename Rows, typename Launch>
void add_column_sums(Launch& L, const Rows& rows, Outputs<K> out, int64_t T, int64_t C) {
  if (T <= 0 || C <= 0) return;
  const Chunks ch = chunks_for(T);
  float* partial = L.buffer(K * ch.count * C);
  L.grid(partials_kernel<K, Rows>, static_cast<unsigned>(ch.count), column_tiles(C), kThreads, rows, partial, T, C,
         ch.rows, ch.count);
  L.grid(finish_kernel<K>, column_tiles(C), 1u, kThreads, static_cast<const float*>(partial), out, C, ch.count);
}

// Rows functors of the model's column sums.

// sum_t x[t, c], x of any element type that Widen turns into a float.
template <typename T, typename Widen>
struct ValueRows {
  const T* x;
  int64_t C;
  __device__ void operator()(int64_t t, int64_t c, float (&acc)[1]) const { acc[0] += Widen()(x[t * C + c]); }
};

struct Identity {
  __device__ float operator()(float v) const { return v; }
};

// LayerNorm's parameter gradients: dgamma += sum_t dY * xhat, dbeta += sum_t dY,
// xhat = (x - mean[t]) * rstd[t] as in the forward.
struct LayerNormParamRows {
  const float *dY, *X, *mean, *rstd;
  int64_t C;
  __device__ void operator()(int64_t t, int64_t c, float (&acc)[2]) const {
    const float dy = dY[t * C + c];
    acc[0] += dy * ((X[t * C + c] - mean[t]) * rstd[t]);
    acc[1] += dy;
  }
};

}  // namespace
}  // namespace column_sums_cuda
}  // namespace pf
