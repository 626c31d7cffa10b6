// Dispatch of the embedding kernels by ctx.device.
#include "kernels/embedding/embedding.h"

namespace pf {

void embedding_forward(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T, int64_t V,
                       int64_t C) {
  if (ctx.device.is_cuda()) embedding_forward_cuda(ctx, ids, table, Y, T, V, C);
  else embedding_forward_cpu(ctx, ids, table, Y, T, V, C);
}

void embedding_backward(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                        int64_t V, int64_t C) {
  if (ctx.device.is_cuda()) embedding_backward_cuda(ctx, ids, dY, dTable, T, V, C);
  else embedding_backward_cpu(ctx, ids, dY, dTable, T, V, C);
}

}  // namespace pf
