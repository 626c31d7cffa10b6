// The backend entry points behind the dispatching functions of
// linear_attention.h: the same list in pf::linattn_cpu (OpenMP + BLAS) and
// pf::linattn_cuda (cuBLAS + small kernels). Shapes are validated by the
// dispatcher before these are called.
#pragma once

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/dtype.h"

#define PF_LINATTN_BACKEND_DECLS                                                                                      \
  void fill(const ExecContext& ctx, float* x, int64_t count, float value);                                            \
  void state_clear(const ExecContext& ctx, const LinAttnShape& s, float* states);                                     \
  void state_combine(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d, const float* earlier,               \
                     const float* later, float* out);                                                                 \
  void causal_forward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* phi_k,    \
                            const float* c_k, const float* v, float* y, float* row_scale, float* block_total);        \
  void add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* prefix, float* y,   \
                  float* row_scale);                                                                                  \
  void normalize(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o, float* den);                \
  void causal_backward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* phi_k,   \
                             const float* c_k, const float* v, const float* o, const float* den,                      \
                             const float* row_scale, const float* d_o, float* d_phi_q, float* d_phi_k, float* d_v,    \
                             float* block_total_grad);                                                                \
  void backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* o, const float* den,           \
                           const float* row_scale, const float* d_o, const float* prefix, float* d_phi_q);            \
  void backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k, const float* c_k,       \
                           const float* v, const float* suffix, float* d_phi_k, float* d_v);                          \
  void key_state(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k, const float* c_k, const float* v, \
                 float* total);                                                                                       \
  void query_state(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* o,                 \
                   const float* den, const float* row_scale, const float* d_o, float* total);

namespace pf::linattn_cpu {
PF_LINATTN_BACKEND_DECLS
}  // namespace pf::linattn_cpu

namespace pf::linattn_cuda {
PF_LINATTN_BACKEND_DECLS
}  // namespace pf::linattn_cuda
