// OpenMP sum of squares over x [n], on ctx.stream: fixed chunks of kChunk
// values, each summed in double by one thread, then the chunk sums added in
// order, so the result does not depend on the thread count; the stream is
// synchronised to return it. scale_values: x *= s.
#include <vector>

#include "kernels/reduce/reduce.h"

namespace pf {
namespace {

constexpr int64_t kChunk = int64_t(1) << 15;

}  // namespace

double sum_of_squares_cpu(const ExecContext& ctx, const float* x, int64_t n) {
  double total = 0.0;  // a host result: wait for the stream, as the CUDA twin does
  host_launch(ctx, [&total, x, n] {
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
    for (double p : partial) total += p;
  });
  synchronize(ctx.stream);
  return total;
}

void scale_values_cpu(const ExecContext& ctx, float* x, int64_t n, float s) {
  host_launch(ctx, [=] {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  });
}

}  // namespace pf
