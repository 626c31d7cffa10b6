// Builds without the CUDA backend: a CUDA ExecContext reaching linear attention
// gets a CudaError saying why there is no CUDA.
#include "kernels/linear_attention/linear_attention_backend.h"
#include "runtime/check.h"

namespace pf::linattn_cuda {
namespace {
[[noreturn]] void unavailable(const ExecContext& ctx) {
  PF_REQUIRE(CudaError, false, "linear attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
  throw CudaError("unreachable");
}
}  // namespace

void fill(const ExecContext& ctx, float*, int64_t, float) { unavailable(ctx); }
void state_clear(const ExecContext& ctx, const LinAttnShape&, float*) { unavailable(ctx); }
void state_combine(const ExecContext& ctx, int64_t, int64_t, int64_t, const float*, const float*, float*) {
  unavailable(ctx);
}
void causal_forward_local(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*,
                          const float*, float*, float*, float*) {
  unavailable(ctx);
}
void add_prefix(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, float*, float*) {
  unavailable(ctx);
}
void normalize(const ExecContext& ctx, const LinAttnShape&, const float*, float*, float*) { unavailable(ctx); }
void causal_backward_local(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*,
                           const float*, const float*, const float*, const float*, const float*, float*, float*, float*,
                           float*) {
  unavailable(ctx);
}
void backward_add_prefix(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*,
                         const float*, const float*, float*) {
  unavailable(ctx);
}
void backward_add_suffix(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*,
                         const float*, float*, float*) {
  unavailable(ctx);
}
void key_state(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*, float*) {
  unavailable(ctx);
}
void query_state(const ExecContext& ctx, const LinAttnShape&, const float*, const float*, const float*, const float*,
                 const float*, float*) {
  unavailable(ctx);
}


}  // namespace pf::linattn_cuda
