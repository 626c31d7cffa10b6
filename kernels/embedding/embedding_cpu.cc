// OpenMP embedding on ctx.stream: ids [T], table [V,C] -> Y [T,C]; backward
// scatter-add into dTable [V,C]. The backward splits the columns into blocks, one per
// iteration, and adds tokens in increasing t inside each block: no atomics, no
// races, and the same sums for any thread count.
#include "kernels/embedding/embedding.h"
#include "runtime/check.h"

namespace pf {
namespace {

constexpr int64_t kColumnBlock = 64;

void check_ids(const int32_t* ids, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t)
    PF_REQUIRE(ValueError, ids[t] >= 0 && ids[t] < V, "embedding: token " << t << " has id " << ids[t] << ", V=" << V);
}

}  // namespace

void embedding_forward_cpu(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T,
                           int64_t V, int64_t C) {
  host_launch(ctx, [=] {
    check_ids(ids, T, V);
#pragma omp parallel for schedule(static) if (T * C > 65536)
    for (int64_t t = 0; t < T; ++t) {
      const float* row = table + static_cast<int64_t>(ids[t]) * C;
      float* y = Y + t * C;
      for (int64_t c = 0; c < C; ++c) y[c] = row[c];
    }
  });
}

void embedding_backward_cpu(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                            int64_t V, int64_t C) {
  host_launch(ctx, [=] {
    check_ids(ids, T, V);
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (T * C > 65536)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * kColumnBlock, c1 = c0 + kColumnBlock < C ? c0 + kColumnBlock : C;
      for (int64_t t = 0; t < T; ++t) {
        float* d = dTable + static_cast<int64_t>(ids[t]) * C;
        const float* g = dY + t * C;
        for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
      }
    }
  });
}

}  // namespace pf
