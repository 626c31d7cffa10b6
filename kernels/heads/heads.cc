#include "kernels/heads/heads.h"

#include "kernels/heads/heads_math.h"

namespace pf {

void heads_split(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads) {
  if (ctx.device.is_cuda())
    heads_split_cuda(ctx, s, rows, heads);
  else
    heads_split_cpu(ctx, s, rows, heads);
}

void heads_merge(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows) {
  if (ctx.device.is_cuda())
    heads_merge_cuda(ctx, s, heads, rows);
  else
    heads_merge_cpu(ctx, s, heads, rows);
}

namespace {
// Row-contiguous copies of D floats on ctx.stream between the per-head row r
// (g, b, h, i) and its token row (b, i, g, h): into the heads (split) or back.
template <bool kSplit>
void move_rows_cpu(const ExecContext& ctx, const HeadsShape& s, const float* from, float* to) {
  host_launch(ctx, [=] {
    const int64_t outer = s.groups * s.batch * s.heads * s.n;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t row = heads_row_index(r * s.dim, s.groups, s.batch, s.heads, s.n, s.dim);
      const int64_t src = kSplit ? row : r * s.dim, dst = kSplit ? r * s.dim : row;
      for (int64_t dd = 0; dd < s.dim; ++dd) to[dst + dd] = from[src + dd];
    }
  });
}
}  // namespace

void heads_split_cpu(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads) {
  move_rows_cpu<true>(ctx, s, rows, heads);
}

void heads_merge_cpu(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows) {
  move_rows_cpu<false>(ctx, s, heads, rows);
}

}  // namespace pf
