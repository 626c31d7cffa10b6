// Dispatch of the linear-attention kernels: shape checks with context, then the
// CPU or CUDA backend. The bidirectional kernels and the optional prefix/suffix
// arguments are compositions of the backend pieces.
#include "kernels/linear_attention/linear_attention.h"

#include "kernels/linear_attention/linear_attention_backend.h"
#include "runtime/check.h"

namespace pf {
namespace {

void check_shape(const LinAttnShape& s, const char* op) {
  PF_REQUIRE(
      ValueError, s.heads >= 0 && s.n >= 0 && s.m > 0 && s.d > 0 && s.chunk > 0,
      op << ": bad shape heads=" << s.heads << " n=" << s.n << " m=" << s.m << " d=" << s.d << " chunk=" << s.chunk);
}

void check_ptrs(bool ok, const char* op, const char* what) {
  PF_REQUIRE(ValueError, ok, op << ": " << what << " must not be null");
}

// linear_attention_<piece>_cuda(ctx, ...) or its twin linear_attention_<piece>_cpu(ctx, ...).
#define PF_LINATTN_DISPATCH(piece, ...)                  \
  do {                                                   \
    if (ctx.device.is_cuda())                            \
      linear_attention_##piece##_cuda(ctx, __VA_ARGS__); \
    else                                                 \
      linear_attention_##piece##_cpu(ctx, __VA_ARGS__);  \
  } while (0)

}  // namespace

void linear_attention_state_clear(const ExecContext& ctx, const LinAttnShape& s, float* states) {
  check_shape(s, __func__);
  check_ptrs(states || s.heads == 0, __func__, "states");
  PF_LINATTN_DISPATCH(state_clear, s, states);
}

void linear_attention_state_combine(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d, const float* earlier,
                                    const float* later, float* out) {
  PF_REQUIRE(ValueError, heads >= 0 && m > 0 && d > 0,
             __func__ << ": bad shape heads=" << heads << " m=" << m << " d=" << d);
  check_ptrs((earlier && later && out) || heads == 0, __func__, "earlier, later and out");
  PF_LINATTN_DISPATCH(state_combine, heads, m, d, earlier, later, out);
}

void linear_attention_segmented_state_clear(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                            float* states) {
  PF_REQUIRE(ValueError, heads >= 0 && m > 0 && d > 0,
             __func__ << ": bad shape heads=" << heads << " m=" << m << " d=" << d);
  check_ptrs(states || heads == 0, __func__, "states");
  PF_LINATTN_DISPATCH(segmented_state_clear, heads, m, d, states);
}

void linear_attention_segmented_state_combine(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                              const float* earlier, const float* later, float* out) {
  PF_REQUIRE(ValueError, heads >= 0 && m > 0 && d > 0,
             __func__ << ": bad shape heads=" << heads << " m=" << m << " d=" << d);
  check_ptrs((earlier && later && out) || heads == 0, __func__, "earlier, later and out");
  PF_LINATTN_DISPATCH(segmented_state_combine, heads, m, d, earlier, later, out);
}

void causal_linear_attention_forward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                           const float* phi_k, const float* c_k, const float* v, float* y,
                                           float* row_scale, float* block_total, const float* initial_state) {
  check_shape(s, __func__);
  check_ptrs(block_total || s.heads == 0, __func__, "block_total");
  check_ptrs((phi_q && phi_k && c_k && v && y && row_scale) || s.heads * s.n == 0, __func__,
             "phi_q, phi_k, c_k, v, y and row_scale");
  PF_LINATTN_DISPATCH(causal_forward_local, s, phi_q, phi_k, c_k, v, y, row_scale, block_total);
  if (initial_state) linear_attention_add_prefix(ctx, s, phi_q, initial_state, y, row_scale);
}

void linear_attention_add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* prefix,
                                 float* y, float* row_scale) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(phi_q && prefix && y && row_scale, __func__, "phi_q, prefix, y and row_scale");
  PF_LINATTN_DISPATCH(add_prefix, s, phi_q, prefix, y, row_scale);
}

void linear_attention_normalize(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o, float* den) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(y && o && den, __func__, "y, o and den");
  PF_LINATTN_DISPATCH(normalize, s, y, o, den);
}

void causal_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                            const float* phi_k, const float* c_k, const float* v, const float* o,
                                            const float* den, const float* row_scale, const float* d_o, float* d_phi_q,
                                            float* d_phi_k, float* d_v, float* block_total_grad, const float* prefix,
                                            const float* suffix) {
  check_shape(s, __func__);
  check_ptrs(block_total_grad || s.heads == 0, __func__, "block_total_grad");
  check_ptrs(
      (phi_q && phi_k && c_k && v && o && den && row_scale && d_o && d_phi_q && d_phi_k && d_v) || s.heads * s.n == 0,
      __func__, "inputs and gradients");
  PF_LINATTN_DISPATCH(causal_backward_local, s, phi_q, phi_k, c_k, v, o, den, row_scale, d_o, d_phi_q, d_phi_k, d_v,
                      block_total_grad);
  if (prefix) linear_attention_backward_add_prefix(ctx, s, o, den, row_scale, d_o, prefix, d_phi_q);
  if (suffix) linear_attention_backward_add_suffix(ctx, s, phi_k, c_k, v, suffix, d_phi_k, d_v);
}

void linear_attention_backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* o,
                                          const float* den, const float* row_scale, const float* d_o,
                                          const float* prefix, float* d_phi_q) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(o && den && row_scale && d_o && prefix && d_phi_q, __func__, "o, den, row_scale, d_o, prefix, d_phi_q");
  PF_LINATTN_DISPATCH(backward_add_prefix, s, o, den, row_scale, d_o, prefix, d_phi_q);
}

void linear_attention_backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                          const float* c_k, const float* v, const float* suffix, float* d_phi_k,
                                          float* d_v) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(phi_k && c_k && v && suffix && d_phi_k && d_v, __func__, "phi_k, c_k, v, suffix, d_phi_k, d_v");
  PF_LINATTN_DISPATCH(backward_add_suffix, s, phi_k, c_k, v, suffix, d_phi_k, d_v);
}

void bidirectional_linear_attention_local_state(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                                const float* c_k, const float* v, float* local_total) {
  check_shape(s, __func__);
  check_ptrs(local_total || s.heads == 0, __func__, "local_total");
  check_ptrs((phi_k && c_k && v) || s.heads * s.n == 0, __func__, "phi_k, c_k and v");
  PF_LINATTN_DISPATCH(key_state, s, phi_k, c_k, v, local_total);
}

void bidirectional_linear_attention_forward_finish(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                   const float* total, float* y, float* row_scale) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(phi_q && total && y && row_scale, __func__, "phi_q, total, y and row_scale");
  PF_LINATTN_DISPATCH(fill, y, s.heads * s.n * (s.d + 1), 0.f);
  PF_LINATTN_DISPATCH(fill, row_scale, s.heads * s.n, kEmptyLogScale);
  PF_LINATTN_DISPATCH(add_prefix, s, phi_q, total, y, row_scale);
}

void bidirectional_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                   const float* o, const float* den, const float* row_scale,
                                                   const float* d_o, const float* total, float* d_phi_q,
                                                   float* local_grad_total) {
  check_shape(s, __func__);
  check_ptrs(local_grad_total || s.heads == 0, __func__, "local_grad_total");
  if (s.heads * s.n == 0) {
    if (s.heads > 0) PF_LINATTN_DISPATCH(state_clear, s, local_grad_total);
    return;
  }
  check_ptrs(phi_q && o && den && row_scale && d_o && total && d_phi_q, __func__,
             "phi_q, o, den, row_scale, d_o, total and d_phi_q");
  PF_LINATTN_DISPATCH(fill, d_phi_q, s.heads * s.n * s.m, 0.f);
  PF_LINATTN_DISPATCH(backward_add_prefix, s, o, den, row_scale, d_o, total, d_phi_q);
  PF_LINATTN_DISPATCH(query_state, s, phi_q, o, den, row_scale, d_o, local_grad_total);
}

void bidirectional_linear_attention_backward_finish(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                                    const float* c_k, const float* v, const float* grad_total,
                                                    float* d_phi_k, float* d_v) {
  check_shape(s, __func__);
  if (s.heads * s.n == 0) return;
  check_ptrs(phi_k && c_k && v && grad_total && d_phi_k && d_v, __func__, "phi_k, c_k, v, grad_total, d_phi_k, d_v");
  PF_LINATTN_DISPATCH(fill, d_phi_k, s.heads * s.n * s.m, 0.f);
  PF_LINATTN_DISPATCH(fill, d_v, s.heads * s.n * s.d, 0.f);
  PF_LINATTN_DISPATCH(backward_add_suffix, s, phi_k, c_k, v, grad_total, d_phi_k, d_v);
}

}  // namespace pf
