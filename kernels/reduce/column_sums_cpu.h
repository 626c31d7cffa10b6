// Deterministic column sums of row-major [T, C] data on the CPU (OpenMP):
//   out_k[c] += sum_t rows_k(t, c)        K sums per column
// Rows [j R, (j + 1) R) form chunk j (R = kRows): one thread sums a chunk's
// rows into fp32 partials in increasing t, reading each row contiguously;
// then each column's chunk partials are added in increasing j in double.
// The order depends on T alone, never on the thread count. A Rows functor
// has `void operator()(int64_t t, float* const (&acc)[K]) const` that adds
// row t's terms of every column c to acc[k][c]. The CUDA twin is
// column_sums_cuda.cuh (its chunks are sized for a GPU).
#pragma once

#include <cstdint>
#include <vector>

namespace pf {
namespace column_sums_cpu {

constexpr int64_t kRows = 256;  // rows per chunk (the last may be shorter)

// out[k][c] += sum over t of rows' k-th term, in the fixed order above.
template <int K, typename Rows>
void add_column_sums(const Rows& rows, float* const (&out)[K], int64_t T, int64_t C) {
  if (T <= 0 || C <= 0) return;
  const int64_t chunks = (T + kRows - 1) / kRows;
  std::vector<float> partial(static_cast<size_t>(K * chunks * C), 0.f);  // [chunks, K, C]
#pragma omp parallel for schedule(static) if (T * C > 32768)
  for (int64_t j = 0; j < chunks; ++j) {
    float* acc[K];
    for (int k = 0; k < K; ++k) acc[k] = partial.data() + (j * K + k) * C;
    const int64_t end = (j + 1) * kRows < T ? (j + 1) * kRows : T;
    for (int64_t t = j * kRows; t < end; ++t) rows(t, acc);
  }
#pragma omp parallel for schedule(static) if (chunks * C > 32768)
  for (int64_t c = 0; c < C; ++c) {
    for (int k = 0; k < K; ++k) {
      double s = 0.0;
      for (int64_t j = 0; j < chunks; ++j) s += partial[static_cast<size_t>((j * K + k) * C + c)];
      out[k][c] += static_cast<float>(s);
    }
  }
}

}  // namespace column_sums_cpu
}  // namespace pf
