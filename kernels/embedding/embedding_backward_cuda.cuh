// The CUDA embedding backward after the sort (embedding_cuda.cu), written
// against the launch policy of kernels/reduce/column_sums_cuda.cuh so that
// the same code runs on a GPU and, for the tests, under the block emulator.
//   keys [T]   token ids sorted (stably: equal ids keep increasing t),
//              out-of-range ids as V; index [T] the token of each key
//   dTable[v, c] += sum over the tokens t with ids[t] == v of dY[t, c]
// The sorted positions are cut into pieces of R (column_sums::chunks_for(T),
// a function of T alone). Pass 1, grid (pieces, column tiles): the thread of
// column c walks its piece in order and sums each run of equal keys. A run
// that starts and ends inside the piece is added to dTable at once (no other
// piece holds that id); the piece's first run when it continues from the
// piece before goes to head [pieces, C], its last run when it continues into
// the next piece to tail [pieces, C]. Pass 2: the piece where such a run
// starts adds its tail and the heads of the pieces it runs through, in
// order. Every id is written by one thread, in an order fixed by T and the
// ids: the same bits on every run and GPU, and every piece of the GPU busy
// however few distinct ids there are.
#pragma once

#include <cstdint>

#include "kernels/reduce/column_sums.h"

namespace pf {
namespace embedding_cuda {
namespace {

using column_sums::kThreads;

struct Sorted {
  const int32_t* keys;
  const int32_t* index;
  int64_t T, V, C, piece;  // piece: R
};

__device__ inline int64_t piece_end(const Sorted& s, int64_t p) {
  const int64_t e = (p + 1) * s.piece;
  return e < s.T ? e : s.T;
}

__global__ void piece_sums_kernel(Sorted s, const float* dY, float* dTable, float* head, float* tail) {
  const int64_t p = blockIdx.x, c = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= s.C) return;
  const int64_t a = p * s.piece, b = piece_end(s, p);
  const bool from_before = a > 0 && s.keys[a - 1] == s.keys[a];
  const bool into_next = b < s.T && s.keys[b] == s.keys[b - 1];
  float acc = 0.f;
  int64_t run_start = a;
  for (int64_t i = a; i < b; ++i) {
    acc += dY[int64_t(s.index[i]) * s.C + c];
    if (i + 1 < b && s.keys[i + 1] == s.keys[i]) continue;
    const int32_t v = s.keys[i];
    if (run_start == a && from_before)
      head[p * s.C + c] = acc;  // also a piece inside one run
    else if (i == b - 1 && into_next)
      tail[p * s.C + c] = acc;
    else if (v < s.V)
      dTable[int64_t(v) * s.C + c] += acc;
    acc = 0.f;
    run_start = i + 1;
  }
}

__global__ void run_sums_kernel(Sorted s, const float* head, const float* tail, float* dTable) {
  const int64_t p = blockIdx.x, c = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= s.C) return;
  const int64_t a = p * s.piece, b = piece_end(s, p);
  const int32_t v = s.keys[b - 1];
  const bool into_next = b < s.T && s.keys[b] == v;
  const bool run_starts_here = !(a > 0 && s.keys[a - 1] == v);
  if (!into_next || !run_starts_here) return;
  float sum = tail[p * s.C + c];
  for (int64_t q = p + 1;; ++q) {
    sum += head[q * s.C + c];
    const int64_t e = piece_end(s, q);
    if (!(e < s.T && s.keys[e] == v)) break;
  }
  if (v < s.V) dTable[int64_t(v) * s.C + c] += sum;
}

// dTable += the scatter of dY over the sorted keys; Launch as in column_sums_cuda.cuh.
template <typename Launch>
void add_sorted_rows(Launch& L, const int32_t* keys, const int32_t* index, const float* dY, float* dTable, int64_t T,
                     int64_t V, int64_t C) {
  if (T <= 0 || C <= 0) return;
  const column_sums::Chunks ch = column_sums::chunks_for(T);
  const Sorted s{keys, index, T, V, C, ch.rows};
  float* head = L.buffer(ch.count * C);
  float* tail = L.buffer(ch.count * C);
  const unsigned pieces = static_cast<unsigned>(ch.count), tiles = static_cast<unsigned>(ceil_div(C, kThreads));
  L.grid(piece_sums_kernel, pieces, tiles, kThreads, s, dY, dTable, head, tail);
  L.grid(run_sums_kernel, pieces, tiles, kThreads, s, static_cast<const float*>(head), static_cast<const float*>(tail),
         dTable);
}

}  // namespace
}  // namespace embedding_cuda
}  // namespace pf
