// OpenMP sum of squares over x [n]: fixed chunks of kChunk values, each summed
// in double by one thread, then the chunk sums added in order, so the result
// does not depend on the thread count. scale_values: x *= s.
#include <vector>

#include "kernels/reduce/reduce.h"

namespace pf {
namespace {

constexpr int64_t kChunk = int64_t(1) << 15;

}  // namespace

double sum_of_squares_cpu(const float* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t i0 = k * kChunk, i1 = i0 + kChunk < n ? i0 + kChunk : n;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[static_cast<size_t>(k)] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void scale_values_cpu(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace pf
