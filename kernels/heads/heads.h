// Moving attention heads between the token-row layout of the projections and
// the per-head layout of the attention kernels.
//   rows  [B, n, G, H, D]   token rows; G stacked groups (3 for q|k|v, 1 for o)
//   heads [G, B, H, n, D]   G consecutive per-head tensors [B, H, n, D]
//   heads_split: heads <- rows;  heads_merge: rows <- heads (both overwrite).
// The backward of a split is a merge of the gradients and vice versa.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

struct HeadsShape {
  int64_t groups = 1, batch = 1, n = 0, heads = 1, dim = 0;
  int64_t numel() const { return groups * batch * n * heads * dim; }
};

void heads_split(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads);
void heads_merge(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows);
void heads_split_cpu(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads);
void heads_merge_cpu(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows);
void heads_split_cuda(const ExecContext& ctx, const HeadsShape& s, const float* rows, float* heads);
void heads_merge_cuda(const ExecContext& ctx, const HeadsShape& s, const float* heads, float* rows);

}  // namespace pf
