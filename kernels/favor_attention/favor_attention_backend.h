// The implementations behind the protocol functions of favor_attention.h: one
// declaration list, instantiated for the fused CPU kernels (suffix _cpu,
// favor_attention_cpu.cc), the fused CUDA kernels (suffix _cuda,
// favor_attention_cuda.cu, in CUDA builds) and the composition over slabs of
// a backend's feature-map and linear-attention kernels (suffix _slabs,
// favor_attention_slabs.cc; any backend with FavorShape::slab_rows > 0).
// Arguments are checked by the dispatcher first.
#pragma once

#include <algorithm>
#include <memory>

#include "kernels/favor_attention/favor_attention.h"

#define PF_FAVOR_BACKEND_DECLS(SUFFIX)                                                                                 \
  void favor_key_state##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,            \
                               const float* W, float* total);                                                          \
  void favor_causal_forward_local##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k, \
                                          const float* v, const float* W, float* y, float* row_scale,                  \
                                          float* block_total);                                                         \
  void favor_add_prefix##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,           \
                                const float* prefix, float* y, float* row_scale);                                      \
  void favor_bidirectional_forward_finish##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* q,         \
                                                  const float* W, const float* total, float* y, float* row_scale);     \
  void favor_causal_backward_local##SUFFIX(                                                                            \
      const ExecContext& ctx, const FavorShape& s, const float* q, const float* k, const float* v, const float* W,     \
      const float* o, const float* den, const float* row_scale, const float* d_o, const float* prefix, float* dq,      \
      float* dk, float* dv, float* block_total_grad, float* dW);                                                       \
  void favor_backward_add_suffix##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,  \
                                         const float* W, const float* suffix, float* dk, float* dv, float* dW);        \
  void favor_bidirectional_backward_local##SUFFIX(                                                                     \
      const ExecContext& ctx, const FavorShape& s, const float* q, const float* W, const float* o, const float* den,   \
      const float* row_scale, const float* d_o, const float* total, float* dq, float* local_grad_total, float* dW);    \
  void favor_bidirectional_backward_finish##SUFFIX(const ExecContext& ctx, const FavorShape& s, const float* k,        \
                                                   const float* v, const float* W, const float* grad_total, float* dk, \
                                                   float* dv, float* dW);

namespace pf {
// Where a call's scratch tensors are recorded: ctx.tracker, or (a CPU context
// without one) `own`, a private tracker on ctx.stream, so that releases stay
// in the stream's order after the queued kernels that read the buffers.
// ValueError for a device context without a tracker.
MemoryTracker& favor_scratch_tracker(const ExecContext& ctx, std::unique_ptr<MemoryTracker>& own);
// The memory tracker's tag of the op's scratch tensors.
constexpr const char* kFavorScratchTag = "favor_attention";
PF_FAVOR_BACKEND_DECLS(_cpu)
PF_FAVOR_BACKEND_DECLS(_slabs)
#if PF_HAVE_CUDA
PF_FAVOR_BACKEND_DECLS(_cuda)
// Whether the fused CUDA kernels' 16-row tiles fit in the shared memory of
// `device`, and the bytes of device temporaries one call may hold at once.
bool favor_cuda_fits(const FavorShape& s, Device device);
int64_t favor_workspace_bytes_cuda(const FavorShape& s);
#endif
// Rows of each slab of the slab composition: slab_rows, or
// kFavorDefaultSlabRows for the fused kernels' fallback, at most n.
inline int64_t favor_rows_per_slab(const FavorShape& s) {
  return std::min(s.slab_rows > 0 ? s.slab_rows : kFavorDefaultSlabRows, std::max<int64_t>(s.n, 1));
}
// One span of len rows of a call over pieces as a block of one head with the
// call's sizes (its projection and dW slot are passed resolved): how the fused
// CPU kernels and the slabs run each span.
inline FavorShape favor_span_shape(const FavorShape& s, int64_t len) {
  FavorShape one = s;
  one.pieces = nullptr;
  one.heads = 1;
  one.n = len;
  one.w_heads = 1;
  return one;
}
// Floats of one thread's tile in the fused CPU kernels.
int64_t favor_tile_floats_cpu(const FavorShape& s);
}  // namespace pf
