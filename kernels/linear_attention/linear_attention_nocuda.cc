// Builds without the CUDA backend: a CUDA ExecContext reaching linear attention
// gets a CudaError saying why there is no CUDA.
#include "kernels/linear_attention/linear_attention_backend.h"
#include "runtime/check.h"

namespace pf {
namespace {
[[noreturn]] void unavailable(const ExecContext& ctx) {
  PF_REQUIRE(CudaError, false, "linear attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
  throw CudaError("unreachable");
}
}  // namespace

void linear_attention_fill_cuda(const ExecContext& ctx, float*, int64_t, float) { unavailable(ctx); }
void linear_attention_state_clear_cuda(const ExecContext& ctx, const LinAttnShape&, float*) { unavailable(ctx); }
void linear_attention_state_combine_cuda(const ExecContext& ctx, int64_t, int64_t, int64_t, const float*, const float*,
                                         float*) {
  unavailable(ctx);
}
void linear_attention_segmented_state_clear_cuda(const ExecContext& ctx, int64_t, int64_t, int64_t, float*) {
  unavailable(ctx);
}
void linear_attention_segmented_state_combine_cuda(const ExecContext& ctx, int64_t, int64_t, int64_t, const float*,
                                                   const float*, float*) {
  unavailable(ctx);
}
void linear_attention_causal_forward_local_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*,
                                                const float*, const float*, float*, float*, float*) {
  unavailable(ctx);
}
void linear_attention_add_prefix_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, float*,
                                      float*) {
  unavailable(ctx);
}
void linear_attention_normalize_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, float*, float*) {
  unavailable(ctx);
}
void linear_attention_causal_backward_local_cuda(const ExecContext& ctx, const LinAttnShape&, const float*,
                                                 const float*, const float*, const float*, const float*, const float*,
                                                 const float*, const float*, float*, float*, float*, float*) {
  unavailable(ctx);
}
void linear_attention_backward_add_prefix_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*,
                                               const float*, const float*, const float*, float*) {
  unavailable(ctx);
}
void linear_attention_backward_add_suffix_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*,
                                               const float*, const float*, float*, float*) {
  unavailable(ctx);
}
void linear_attention_key_state_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*,
                                     const float*, float*) {
  unavailable(ctx);
}
void linear_attention_query_state_cuda(const ExecContext& ctx, const LinAttnShape&, const float*, const float*,
                                       const float*, const float*, const float*, float*) {
  unavailable(ctx);
}

}  // namespace pf
