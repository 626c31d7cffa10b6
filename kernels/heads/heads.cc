#include "kernels/heads/heads.h"

#include "kernels/heads/heads_math.h"

namespace pf {

void heads_split(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads) {
  if (ctx.device.is_cuda()) heads_split_cuda(ctx, s, rows, heads);
  else heads_split_cpu(ctx, s, rows, heads);
}

void heads_merge(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows) {
  if (ctx.device.is_cuda()) heads_merge_cuda(ctx, s, heads, rows);
  else heads_merge_cpu(ctx, s, heads, rows);
}

// Row-contiguous copies of D floats on ctx.stream: (g, b, h, i) -> (b, i, g, h).
void heads_split_cpu(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads) {
  host_launch(ctx, [=] {
    const int64_t outer = s.groups * s.batch * s.heads * s.n;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t src = heads_row_index(r * s.dim, s.groups, s.batch, s.heads, s.n, s.dim);
      for (int64_t dd = 0; dd < s.dim; ++dd) heads[r * s.dim + dd] = rows[src + dd];
    }
  });
}

void heads_merge_cpu(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows) {
  host_launch(ctx, [=] {
    const int64_t outer = s.groups * s.batch * s.heads * s.n;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t dst = heads_row_index(r * s.dim, s.groups, s.batch, s.heads, s.n, s.dim);
      for (int64_t dd = 0; dd < s.dim; ++dd) rows[dst + dd] = heads[r * s.dim + dd];
    }
  });
}

}  // namespace pf
