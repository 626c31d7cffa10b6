// The fixed chunking of the CUDA column sums (column_sums_cuda.cuh): rows
// [j R, (j + 1) R) of a [T, C] array form chunk j, with R a function of T
// alone, so the order of additions, and with it every bit of the result, is
// the same on every run and every GPU. Plain C++ so that the planner can
// count the scratch.
#pragma once

#include <cstdint>

#include "runtime/int_math.h"

namespace pf {
namespace column_sums {

constexpr int kThreads = 128;          // threads per block: one column each
constexpr int64_t kMaxChunks = 1024;   // chunks of rows, at most
constexpr int64_t kMinChunkRows = 64;  // rows per chunk, at least

struct Chunks {
  int64_t rows = 1;   // R: rows per chunk (the last may be shorter)
  int64_t count = 0;  // ceil(T / R)
};

inline Chunks chunks_for(int64_t T) {
  Chunks ch;
  if (T <= 0) return ch;
  const int64_t spread = ceil_div(T, kMaxChunks);
  ch.rows = spread > kMinChunkRows ? spread : kMinChunkRows;
  ch.count = ceil_div(T, ch.rows);
  return ch;
}

}  // namespace column_sums

// Device bytes of the scratch that K column sums of a [T, C] array take:
// K x chunks x C floats, at most 4 KiB per column and sum.
inline int64_t column_sums_scratch_bytes(int64_t T, int64_t C, int K) {
  return 4 * int64_t{K} * column_sums::chunks_for(T).count * C;
}

}  // namespace pf
