// The backend entry points behind the dispatching functions of
// linear_attention.h: one declaration list, instantiated for the CPU backend
// (suffix _cpu: OpenMP + BLAS, on ctx.stream) and the CUDA backend (suffix
// _cuda: cuBLAS + small kernels, on ctx.stream), e.g.
// linear_attention_state_clear_cpu(ctx, ...) and its twin
// linear_attention_state_clear_cuda(ctx, ...). Shapes are validated by the
// dispatcher before these are called.
#pragma once

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/dtype.h"

#define PF_LINATTN_BACKEND_DECLS(SUFFIX)                                                                               \
  void linear_attention_fill##SUFFIX(const ExecContext& ctx, float* x, int64_t count, float value);                    \
  void linear_attention_state_clear##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, float* states);             \
  void linear_attention_state_combine##SUFFIX(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,             \
                                              const float* earlier, const float* later, float* out);                   \
  void linear_attention_segmented_state_clear##SUFFIX(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,     \
                                                      float* states);                                                  \
  void linear_attention_segmented_state_combine##SUFFIX(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,   \
                                                        const float* earlier, const float* later, float* out);         \
  void linear_attention_causal_forward_local##SUFFIX(const ExecContext& ctx, const LinAttnShape& s,                    \
                                                     const float* phi_q, const float* phi_k, const float* c_k,         \
                                                     const float* v, float* y, float* row_scale, float* block_total);  \
  void linear_attention_add_prefix##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,          \
                                           const float* prefix, float* y, float* row_scale);                           \
  void linear_attention_normalize##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o,     \
                                          float* den);                                                                 \
  void linear_attention_causal_backward_local##SUFFIX(                                                                 \
      const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* phi_k, const float* c_k,         \
      const float* v, const float* o, const float* den, const float* row_scale, const float* d_o, float* d_phi_q,      \
      float* d_phi_k, float* d_v, float* block_total_grad);                                                            \
  void linear_attention_backward_add_prefix##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* o,     \
                                                    const float* den, const float* row_scale, const float* d_o,        \
                                                    const float* prefix, float* d_phi_q);                              \
  void linear_attention_backward_add_suffix##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k, \
                                                    const float* c_k, const float* v, const float* suffix,             \
                                                    float* d_phi_k, float* d_v);                                       \
  void linear_attention_key_state##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,           \
                                          const float* c_k, const float* v, float* total);                             \
  void linear_attention_query_state##SUFFIX(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,         \
                                            const float* o, const float* den, const float* row_scale,                  \
                                            const float* d_o, float* total);

namespace pf {
PF_LINATTN_BACKEND_DECLS(_cpu)
PF_LINATTN_BACKEND_DECLS(_cuda)
}  // namespace pf
